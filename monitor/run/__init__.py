"""``monitor run``: the whole monitor on one host as one supervised unit -- the collector,
the job on local Spark, both ``/metrics``, and a one-broker Kafka of its own for its topics
(:mod:`monitor.run.runner`; the command: :mod:`monitor.commands.run`)."""
