"""evoharness.graph"""
