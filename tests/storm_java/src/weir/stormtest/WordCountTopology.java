package weir.stormtest;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.storm.Config;
import org.apache.storm.LocalCluster;
import org.apache.storm.spout.SpoutOutputCollector;
import org.apache.storm.state.KeyValueState;
import org.apache.storm.task.OutputCollector;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.BasicOutputCollector;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.TopologyBuilder;
import org.apache.storm.topology.base.BaseBasicBolt;
import org.apache.storm.topology.base.BaseRichSpout;
import org.apache.storm.topology.base.BaseStatefulBolt;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Tuple;
import org.apache.storm.tuple.Values;

/**
 * Apache Storm's stateful word count, run in LocalCluster for weir's tests and bench/vs_storm.py.
 *
 * <p>Usage: {@code WordCountTopology STATE LINES_FILE REPORT_JSON [SPOUTS SPLITS COUNTS]} where STATE is
 * {@code memory}, {@code redis:HOST:PORT} or {@code cluster:HOST:PORT,HOST:PORT,...}. A reliable spout
 * emits every line of LINES_FILE once (message id = line number), a split bolt emits its words, a
 * {@code BaseStatefulBolt} counts them in a {@code KeyValueState<String, Long>} (fields grouping on the
 * word, checkpoint interval 1 s). The program stops the cluster once every line is acked: a stateful
 * bolt acks its input only after the checkpoint that holds it committed, so by then every count is in
 * the state store. It writes a JSON report (times in ns since submit, counts per word).
 */
public final class WordCountTopology {
    static final AtomicLong ACKED = new AtomicLong();
    static final AtomicLong FAILED = new AtomicLong();
    static final AtomicLong COUNTED = new AtomicLong();
    static final AtomicLong LAST_COUNTED_NS = new AtomicLong();
    static final Map<String, Long> COUNTS = new ConcurrentHashMap<>();
    static final java.util.concurrent.ConcurrentLinkedQueue<Long> LATENCIES_NS = new java.util.concurrent.ConcurrentLinkedQueue<>();
    static volatile List<String> lines = new ArrayList<>();
    /** Lines per second the spout emits at (system property weir.rate; 0 = as fast as it may). */
    static final double RATE = Double.parseDouble(System.getProperty("weir.rate", "0"));

    private WordCountTopology() {
    }

    /** Emits each line once, anchored; a failed line is emitted again. */
    public static final class LineSpout extends BaseRichSpout {
        private SpoutOutputCollector collector;
        private int next;
        private int step;
        private final java.util.ArrayDeque<Integer> retry = new java.util.ArrayDeque<>();
        private final Map<Integer, Long> emitted = new java.util.HashMap<>();
        private long started;
        private long sent;

        @Override
        public void open(Map<String, Object> conf, TopologyContext context, SpoutOutputCollector collector) {
            this.collector = collector;
            this.next = context.getThisTaskIndex();
            this.step = context.getComponentTasks(context.getThisComponentId()).size();
        }

        @Override
        public void nextTuple() {
            Integer again = retry.poll();
            if (again != null) {
                collector.emit(new Values(lines.get(again)), again);
                return;
            }
            if (next < lines.size()) {
                if (RATE > 0) {
                    long now = System.nanoTime();
                    if (started == 0) {
                        started = now;
                    }
                    if (sent >= (now - started) * RATE / 1e9) {
                        return;
                    }
                    emitted.put(next, now);
                    sent++;
                }
                collector.emit(new Values(lines.get(next)), next);
                next += step;
            }
        }

        @Override
        public void ack(Object msgId) {
            ACKED.incrementAndGet();
            Long at = emitted.remove(msgId);
            if (at != null) {
                LATENCIES_NS.add(System.nanoTime() - at);
            }
        }

        @Override
        public void fail(Object msgId) {
            FAILED.incrementAndGet();
            retry.add((Integer) msgId);
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer declarer) {
            declarer.declare(new Fields("line"));
        }
    }

    /** Splits a line on spaces. */
    public static final class SplitBolt extends BaseBasicBolt {
        @Override
        public void execute(Tuple input, BasicOutputCollector collector) {
            for (String word : input.getString(0).split(" ")) {
                if (!word.isEmpty()) {
                    collector.emit(new Values(word));
                }
            }
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer declarer) {
            declarer.declare(new Fields("word"));
        }
    }

    /** Counts words in Storm's checkpointed key-value state. */
    public static final class CountBolt extends BaseStatefulBolt<KeyValueState<String, Long>> {
        private KeyValueState<String, Long> counts;
        private OutputCollector collector;

        @Override
        public void prepare(Map<String, Object> conf, TopologyContext context, OutputCollector collector) {
            this.collector = collector;
        }

        @Override
        public void initState(KeyValueState<String, Long> state) {
            this.counts = state;
        }

        @Override
        public void execute(Tuple input) {
            String word = input.getString(0);
            long n = counts.get(word, 0L) + 1;
            counts.put(word, n);
            COUNTS.put(word, n);
            COUNTED.incrementAndGet();
            LAST_COUNTED_NS.set(System.nanoTime());
            collector.ack(input);
        }
    }

    private static String latencies() {
        List<Long> all = new ArrayList<>(LATENCIES_NS);
        java.util.Collections.sort(all);
        if (all.isEmpty()) {
            return "null";
        }
        return String.format(java.util.Locale.ROOT, "{\"n\": %d, \"p50\": %.2f, \"p95\": %.2f, \"p99\": %.2f}", all.size(),
            all.get(all.size() / 2) / 1e6, all.get((int) (all.size() * 0.95)) / 1e6, all.get((int) (all.size() * 0.99)) / 1e6);
    }

    public static void main(String[] args) throws Exception {
        String state = args[0];
        lines = Files.readAllLines(Paths.get(args[1]), StandardCharsets.UTF_8);
        String report = args[2];
        int spouts = args.length > 3 ? Integer.parseInt(args[3]) : 1;
        int splits = args.length > 4 ? Integer.parseInt(args[4]) : 2;
        int countTasks = args.length > 5 ? Integer.parseInt(args[5]) : 2;
        long words = 0;
        for (String line : lines) {
            for (String w : line.split(" ")) {
                if (!w.isEmpty()) {
                    words++;
                }
            }
        }

        TopologyBuilder builder = new TopologyBuilder();
        builder.setSpout("lines", new LineSpout(), spouts);
        builder.setBolt("split", new SplitBolt(), splits).shuffleGrouping("lines");
        builder.setBolt("count", new CountBolt(), countTasks).fieldsGrouping("split", new Fields("word"));

        Config conf = new Config();
        conf.put(Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL, 1000);
        conf.put(Config.TOPOLOGY_MAX_SPOUT_PENDING, Integer.getInteger("weir.max.spout.pending", 20000));
        conf.put(Config.TOPOLOGY_ACKER_EXECUTORS, 1);
        conf.put(Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS, 120);
        if (state.startsWith("redis:")) {
            String[] hp = state.substring(6).split(":");
            conf.put(Config.TOPOLOGY_STATE_PROVIDER, "org.apache.storm.redis.state.RedisKeyValueStateProvider");
            conf.put(Config.TOPOLOGY_STATE_PROVIDER_CONFIG,
                "{\"jedisPoolConfig\": {\"host\": \"" + hp[0] + "\", \"port\": " + hp[1] + "}}");
        } else if (state.startsWith("cluster:")) {
            StringBuilder nodes = new StringBuilder();
            for (String node : state.substring(8).split(",")) {
                nodes.append(nodes.length() == 0 ? "" : ", ").append('"').append(node).append('"');
            }
            conf.put(Config.TOPOLOGY_STATE_PROVIDER, "org.apache.storm.redis.state.RedisKeyValueStateProvider");
            conf.put(Config.TOPOLOGY_STATE_PROVIDER_CONFIG,
                "{\"jedisClusterConfig\": {\"nodes\": [" + nodes + "], \"timeout\": 5000, \"maxRedirections\": 5}}");
        } else if (!state.equals("memory")) {
            throw new IllegalArgumentException("STATE must be memory, redis:HOST:PORT or cluster:HOST:PORT,..., not " + state);
        }

        long total = lines.size();
        long submitted;
        long countedNs = 0;
        long ackedNs;
        try (LocalCluster cluster = new LocalCluster()) {
            submitted = System.nanoTime();
            cluster.submitTopology("wordcount", conf, builder.createTopology());
            long deadline = submitted + 600_000_000_000L;
            while (ACKED.get() < total) {
                if (countedNs == 0 && COUNTED.get() >= words) {
                    countedNs = LAST_COUNTED_NS.get() - submitted;
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("Storm acked " + ACKED.get() + " of " + total + " lines in 600 s");
                }
                Thread.sleep(5);
            }
            ackedNs = System.nanoTime() - submitted;
            if (countedNs == 0) {
                countedNs = LAST_COUNTED_NS.get() - submitted;
            }
            cluster.killTopology("wordcount");
        }
        try (PrintWriter out = new PrintWriter(Files.newBufferedWriter(Paths.get(report), StandardCharsets.UTF_8))) {
            out.print("{\"lines\": " + total + ", \"words\": " + words + ", \"counted\": " + COUNTED.get()
                + ", \"failed\": " + FAILED.get() + ", \"counted_ns\": " + countedNs + ", \"acked_ns\": " + ackedNs
                + ", \"complete_latency_ms\": " + latencies() + ", \"counts\": {");
            boolean first = true;
            for (Map.Entry<String, Long> e : COUNTS.entrySet()) {
                out.print((first ? "" : ", ") + "\"" + e.getKey().replace("\\", "\\\\").replace("\"", "\\\"") + "\": " + e.getValue());
                first = false;
            }
            out.println("}}");
        }
        System.exit(0);
    }
}
