"""`vpa replay`: the recommender's own logic offline over a usage trace, and its evaluation.

`replaying` reads traces and replays them, `evaluating` replays recommenders in time and renders their
scores, `scoring` is the pure scoring of a recommendation against the usage that followed.

Must not: talk to a cluster or read the clock."""
