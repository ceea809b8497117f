"""`make bench` and its scaffolding: our API beside the PostGraphile peer (bench/README.md)."""
