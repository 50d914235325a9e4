"""The loops and servers (recommender, updater, webhook, health); they never import each other."""
