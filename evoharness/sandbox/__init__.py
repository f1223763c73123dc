"""evoharness.sandbox"""
