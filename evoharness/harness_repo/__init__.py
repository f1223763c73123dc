"""The harness git repo: manifest, surfaces, candidate branches, verified merge, PR export."""
