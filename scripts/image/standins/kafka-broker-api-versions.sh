#!/bin/bash
# The official image's tool of the same path, which compose's health check runs.
exec java -Xmx128m -cp '/opt/kafka/libs/*' org.apache.kafka.tools.BrokerApiVersionsCommand "$@"
