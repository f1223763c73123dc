"""evoharness.datasets"""
