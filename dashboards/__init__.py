"""The Grafana dashboards: their names Grafana knows them by, here without Grafana's SDK.

``dashboards.generate`` builds the dashboards with the foundation SDK (the ``dashboards``
extra); ``monitor dashboards push`` sends the committed JSON (``dashboards/json/``, package
data) and needs only these uids, so it runs on the base install.
"""

#: The Prometheus datasource every dashboard's ``datasource`` variable defaults to: created
#: by ``monitor dashboards push`` and by ``deploy/grafana/provisioning``.
DATASOURCE_UID = "kafka-replication-prometheus"
DATASOURCE_NAME = "Kafka replication Prometheus"
#: The folder the dashboards live in.
FOLDER_UID = "kafka-replication"
