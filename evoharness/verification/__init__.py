"""evoharness.verification"""
