"""evoharness.reports"""
