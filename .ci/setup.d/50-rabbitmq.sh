# RabbitMQ: Debian's rabbitmq-server, for the Storm spout tests (tests/storm_spouts). The fixture
# (tests/servers.py RabbitMQServer) starts its own node from /usr/lib/rabbitmq/bin/rabbitmq-server;
# the package's system service is not needed (and is not started in a container).
if [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ]; then
    apt_install rabbitmq-server
fi
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || die "rabbitmq-server is still missing after installing it"
log "rabbitmq-server $(dpkg-query -W -f='${Version}' rabbitmq-server 2>/dev/null || echo '?')"
