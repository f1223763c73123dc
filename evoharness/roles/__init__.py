"""evoharness.roles"""
