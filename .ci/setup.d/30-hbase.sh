# HBase (standalone master + region server, and the Thrift gateway) from its Maven Central jars,
# for the hbase state provider and HBaseMapState tests. Sourced by .ci/run; also runnable alone:
#   bash .ci/setup.d/30-hbase.sh
# The jars land in ${WEIR_CACHE:-$HOME/.cache/weir}/hbase-<version>/lib, where tests/servers.py
# (HBaseServer) looks for them. Idempotent: a complete download is marked by lib/.complete.
#
# 2.6.1 is the newest 2.x release whose hbase-thrift jar is on Maven Central (hbase-thrift is not
# published for the -hadoop3 builds, nor for 2.6.2+); it pulls hbase-server 2.6.1 and Hadoop 2.10.2.

weir_hbase_fetch() {
    local version="${WEIR_HBASE_VERSION:-2.6.1}"
    local cache="${WEIR_CACHE:-$HOME/.cache/weir}"
    local lib="$cache/hbase-$version/lib"
    if [ -f "$lib/.complete" ]; then
        echo "hbase $version: jars already in $lib"
        return 0
    fi
    command -v mvn >/dev/null 2>&1 || {
        if declare -F apt_install >/dev/null 2>&1; then apt_install maven; else
            echo "hbase: mvn is missing (apt-get install maven)" >&2; return 1; fi
    }
    local pom
    pom="$(mktemp -d -t weir-hbase-pom.XXXXXX)"
    cat > "$pom/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>weir</groupId><artifactId>weir-hbase-jars</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.hbase</groupId><artifactId>hbase-server</artifactId><version>$version</version></dependency>
    <dependency><groupId>org.apache.hbase</groupId><artifactId>hbase-thrift</artifactId><version>$version</version></dependency>
    <dependency><groupId>org.apache.hbase</groupId><artifactId>hbase-zookeeper</artifactId><version>$version</version></dependency>
  </dependencies>
</project>
POM
    echo "hbase $version: mvn dependency:copy-dependencies -> $lib"
    rm -rf "$lib"
    mkdir -p "$lib"
    if ! (cd "$pom" && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$lib"); then
        rm -rf "$pom"
        echo "hbase: downloading the HBase $version jars from Maven Central failed" >&2
        return 1
    fi
    rm -rf "$pom"
    ls "$lib"/hbase-server-"$version".jar "$lib"/hbase-thrift-"$version".jar >/dev/null || return 1
    touch "$lib/.complete"
}

if declare -F die >/dev/null 2>&1; then
    weir_hbase_fetch || die "HBase jars could not be fetched (see above)"
else
    weir_hbase_fetch
fi
