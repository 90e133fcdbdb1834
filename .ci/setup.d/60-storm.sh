# Apache Storm's jars (storm-client, storm-server with LocalCluster, storm-redis) for the
# `weir state import-storm` tests and bench/vs_storm.py, from Maven Central into
# ${WEIR_CACHE:-$HOME/.cache/weir}/storm-<version>/ (tests/storm_java/local.py reads the same place).
# The tests compile tests/storm_java/src with javac against them. Sourced by .ci/run; also runnable
# alone: bash .ci/setup.d/60-storm.sh
STORM_VERSION="$(sed -n 's:.*<storm.version>\(.*\)</storm.version>.*:\1:p' "${ROOT:-.}/tests/storm_java/pom.xml")"
STORM_JARS="${WEIR_CACHE:-$HOME/.cache/weir}/storm-$STORM_VERSION"
if [ ! -f "$STORM_JARS/.complete" ]; then
    command -v mvn >/dev/null 2>&1 || apt_install maven
    command -v javac >/dev/null 2>&1 || apt_install openjdk-17-jdk-headless
    printf '\n==> %s\n' "fetching Apache Storm $STORM_VERSION's jars into $STORM_JARS"
    rm -rf "$STORM_JARS.tmp"
    mvn -q -B -f "${ROOT:-.}/tests/storm_java/pom.xml" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$STORM_JARS.tmp"
    ls "$STORM_JARS.tmp"/storm-server-"$STORM_VERSION".jar "$STORM_JARS.tmp"/storm-redis-"$STORM_VERSION".jar >/dev/null
    touch "$STORM_JARS.tmp/.complete"
    rm -rf "$STORM_JARS"
    mv "$STORM_JARS.tmp" "$STORM_JARS"
fi
printf 'storm %s: %s (%s jars)\n' "$STORM_VERSION" "$STORM_JARS" "$(ls "$STORM_JARS"/*.jar | wc -l)"
