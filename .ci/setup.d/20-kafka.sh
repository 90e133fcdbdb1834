# Apache Kafka's broker jars (KRaft mode) for the Kafka tests, examples and benchmarks, from Maven
# Central into ${WEIR_CACHE:-$HOME/.cache/weir}/kafka-<version>/ (tests/servers.py reads the same place).
# Sourced by .ci/run; also runnable alone: bash .ci/setup.d/20-kafka.sh
KAFKA_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "${ROOT:-.}/.ci/kafka/pom.xml")"
KAFKA_JARS="${WEIR_CACHE:-$HOME/.cache/weir}/kafka-$KAFKA_VERSION"
if [ ! -f "$KAFKA_JARS/.complete" ]; then
    command -v mvn >/dev/null 2>&1 || apt_install maven
    printf '\n==> %s\n' "fetching Apache Kafka $KAFKA_VERSION's jars into $KAFKA_JARS"
    rm -rf "$KAFKA_JARS.tmp"
    mvn -q -B -f "${ROOT:-.}/.ci/kafka/pom.xml" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$KAFKA_JARS.tmp"
    ls "$KAFKA_JARS.tmp"/kafka_2.13-"$KAFKA_VERSION".jar >/dev/null
    touch "$KAFKA_JARS.tmp/.complete"
    rm -rf "$KAFKA_JARS"
    mv "$KAFKA_JARS.tmp" "$KAFKA_JARS"
fi
printf 'kafka %s: %s (%s jars)\n' "$KAFKA_VERSION" "$KAFKA_JARS" "$(ls "$KAFKA_JARS"/*.jar | wc -l)"
