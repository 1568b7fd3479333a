#!/bin/bash
# The command of the SparkApplication's pods (stream.sparkEntrypoint).
#
# Spark on Kubernetes starts its driver pod with the arguments `driver --properties-file ...
# --class ... <app> <app args>` and its executor pods with `executor` and the environment
# (SPARK_DRIVER_URL, SPARK_EXECUTOR_ID, ...): Spark's own images have an entrypoint that turns
# these into spark-submit (client mode, inside the driver pod) and the executor backend. The
# monitor's image has `monitor` as its entrypoint and pyspark's Spark (SPARK_HOME: the
# pyspark package), so these pods run this script instead. Anything else goes to `monitor`.
set -euo pipefail

if [ -z "${SPARK_HOME:-}" ]; then
  SPARK_HOME=$(python3 -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
  export SPARK_HOME
fi

case "${1:-}" in
  driver)
    shift
    exec "$SPARK_HOME/bin/spark-submit" \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS}" \
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=${SPARK_DRIVER_BIND_ADDRESS}" \
      --deploy-mode client \
      "$@"
    ;;
  executor)
    shift
    # SPARK_JAVA_OPT_<n>: the executor's JVM options, in the order of n.
    java_opts=()
    while IFS='=' read -r name value; do
      java_opts+=("$value")
    done < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n || true)
    java=java
    [ -n "${JAVA_HOME:-}" ] && java=$JAVA_HOME/bin/java
    exec "$java" "${java_opts[@]}" \
      -Xms"${SPARK_EXECUTOR_MEMORY}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
      -cp "${SPARK_CLASSPATH:+${SPARK_CLASSPATH}:}${SPARK_HOME}/jars/*" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "${SPARK_DRIVER_URL}" \
      --executor-id "${SPARK_EXECUTOR_ID}" \
      --cores "${SPARK_EXECUTOR_CORES}" \
      --app-id "${SPARK_APPLICATION_ID}" \
      --hostname "${SPARK_EXECUTOR_POD_IP}" \
      --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID}" \
      --podName "${SPARK_EXECUTOR_POD_NAME}"
    ;;
  *)
    exec monitor "$@"
    ;;
esac
