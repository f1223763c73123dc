"""evoharness.service"""
