"""evoharness.agent"""
