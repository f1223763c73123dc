"""evoharness.envs"""
