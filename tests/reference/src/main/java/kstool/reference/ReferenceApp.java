package kstool.reference;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.SortedSet;
import java.util.TreeSet;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.InvalidStateStoreException;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.query.QueryResult;
import org.apache.kafka.streams.query.StateQueryRequest;
import org.apache.kafka.streams.query.StateQueryResult;
import org.apache.kafka.streams.query.VersionedKeyQuery;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlySessionStore;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.VersionedRecord;
import org.apache.kafka.streams.state.WindowStore;

/**
 * A Kafka Streams application of the tests, by name, against a real broker:
 * {@code ReferenceApp APP BOOTSTRAP APPLICATION_ID GROUP_PROTOCOL STATE_DIR INPUT OUTPUT [NAME=VALUE...]}
 * (the NAME=VALUE pairs: more StreamsConfig settings).
 * It prints its topology's describe() text between "topology:" and "end-topology", then
 * "state RUNNING" (and every later state), and reads commands on stdin: "query KIND STORE FILE
 * [KEY...]" (KIND: key-value, window, session; versioned, for the KEYs) writes what Interactive
 * Queries return for the store as JSON and prints "queried FILE"; "stop" (or the end of stdin)
 * closes the app, leaving its group, and exits.
 */
public final class ReferenceApp {

    private ReferenceApp() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 7) {
            System.err.println("usage: ReferenceApp APP BOOTSTRAP APPLICATION_ID GROUP_PROTOCOL STATE_DIR INPUT OUTPUT [NAME=VALUE...]");
            System.exit(2);
        }
        String app = args[0];
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[2]);
        props.put("group.protocol", args[3].toLowerCase(Locale.ROOT));
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        // every update reaches the changelog and the output at once, committed every 100 ms
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        for (String setting : Arrays.copyOfRange(args, 7, args.length)) {
            String[] nameValue = setting.split("=", 2);
            props.put(nameValue[0], nameValue[1]);
        }
        Topology topology = build(app, args[5], args[6]);
        System.out.println("topology:");
        System.out.println(topology.describe());
        System.out.println("end-topology");
        System.out.flush();

        KafkaStreams streams = new KafkaStreams(topology, props);
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("state " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        streams.start();
        try (BufferedReader commands = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = commands.readLine()) != null && !line.equals("stop")) {
                String[] words = line.split(" ");
                if (words.length >= 4 && words[0].equals("query")) {
                    Files.writeString(Path.of(words[3]), query(streams, words[1], words[2],
                            Arrays.copyOfRange(words, 4, words.length)));
                    System.out.println("queried " + words[3]);
                } else {
                    System.out.println("unknown command " + Arrays.toString(words));
                }
                System.out.flush();
            }
        }
        // leaving the group: a classic member would otherwise stay until its session times out
        // (Kafka Streams does not leave on a plain close), and a reset refuses an active group
        streams.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                .withTimeout(Duration.ofSeconds(30)));
        stopped.await(30, TimeUnit.SECONDS);
    }

    static Topology build(String app, String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        switch (app) {
            case "wordcount":
                // Kafka's WordCountDemo, its store named: a timestamped key-value store
                builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                        .flatMapValues(value -> Arrays.asList(value.toLowerCase(Locale.ROOT).split("\\W+")))
                        .groupBy((key, word) -> word, Grouped.with(Serdes.String(), Serdes.String()))
                        .count(Materialized.as("counts"))
                        .toStream()
                        .to(output, Produced.with(Serdes.String(), Serdes.Long()));
                break;
            case "windows": {
                // every window kind's count over the same keys: tumbling (its final counts to the
                // output through suppress), hopping, sliding and session stores to query
                KGroupedStream<String, String> byKey = builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                        .groupByKey(Grouped.with(Serdes.String(), Serdes.String()));
                byKey.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(1), Duration.ofSeconds(30)))
                        .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("tumbling"))
                        .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()).withName("final"))
                        .toStream((window, count) -> window.key() + "@" + window.window().start())
                        .to(output, Produced.with(Serdes.String(), Serdes.Long()));
                byKey.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(1), Duration.ofMinutes(10))
                                .advanceBy(Duration.ofSeconds(30)))
                        .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("hopping"));
                byKey.windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofSeconds(30), Duration.ofMinutes(10)))
                        .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("sliding"));
                byKey.windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofSeconds(30), Duration.ofMinutes(10)))
                        .count(Materialized.<String, Long, SessionStore<Bytes, byte[]>>as("sessions"));
                break;
            }
            case "joins": {
                // INPUT: orders (key product); INPUT-prices: a versioned table; INPUT-regions: a
                // global table; INPUT-accounts and INPUT-customers: tables joined by foreign key
                // (an account's value "customer|..."). OUTPUT: orders with their price at the
                // order's time; OUTPUT-global: with their region; OUTPUT-fk: accounts with their customer.
                KStream<String, String> orders = builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()));
                KTable<String, String> prices = builder.table(input + "-prices", Consumed.with(Serdes.String(), Serdes.String()),
                        Materialized.<String, String>as(Stores.persistentVersionedKeyValueStore("prices", Duration.ofMinutes(10)))
                                .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()));
                orders.join(prices, (quantity, price) -> quantity + "x" + price, Joined.with(Serdes.String(), Serdes.String(), Serdes.String()))
                        .to(output, Produced.with(Serdes.String(), Serdes.String()));
                GlobalKTable<String, String> regions = builder.globalTable(input + "-regions",
                        Consumed.with(Serdes.String(), Serdes.String()),
                        Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("regions"));
                orders.join(regions, (product, quantity) -> product, (quantity, region) -> quantity + "@" + region)
                        .to(output + "-global", Produced.with(Serdes.String(), Serdes.String()));
                KTable<String, String> customers = builder.table(input + "-customers", Consumed.with(Serdes.String(), Serdes.String()),
                        Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("customers"));
                KTable<String, String> accounts = builder.table(input + "-accounts", Consumed.with(Serdes.String(), Serdes.String()),
                        Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("accounts"));
                accounts.join(customers, account -> account.split("\\|")[0], (account, customer) -> account + "/" + customer)
                        .toStream().to(output + "-fk", Produced.with(Serdes.String(), Serdes.String()));
                break;
            }
            case "doubler":
                // fails on every value that is not a number: with a processing exception handler
                // that continues and errors.dead.letter.queue.topic.name set, a KIP-1034 dead letter
                builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                        .mapValues(value -> String.valueOf(Long.parseLong(value) * 2))
                        .to(output, Produced.with(Serdes.String(), Serdes.String()));
                break;
            default:
                throw new IllegalArgumentException("no reference app " + app);
        }
        return builder.build();
    }

    /**
     * What Interactive Queries return for the store, as JSON, once it can be queried (after a
     * rebalance): a key-value store as {"key": value, ...}; a window or session store as
     * [{"key", "start", "end", "value"}, ...] (all windows; all sessions).
     */
    static String query(KafkaStreams streams, String kind, String store, String[] keys) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (true) {
            try {
                switch (kind) {
                    case "key-value":
                        try (KeyValueIterator<Object, Object> entries = streams.store(StoreQueryParameters.fromNameAndType(
                                store, QueryableStoreTypes.keyValueStore())).all()) {
                            return keyValues(entries);
                        }
                    case "window":
                        StringBuilder windowsJson = new StringBuilder("[");
                        try (KeyValueIterator<Windowed<Object>, Object> windows = streams.store(StoreQueryParameters.fromNameAndType(
                                store, QueryableStoreTypes.windowStore())).all()) {
                            appendWindowed(windowsJson, windows);
                        }
                        return windowsJson.append("]").toString();
                    case "session":
                        // partition by partition: over all of them, findSessions(null, null, ...)
                        // returns the first partition's sessions only (CompositeReadOnlySessionStore)
                        StringBuilder sessionsJson = new StringBuilder("[");
                        for (int partition : localPartitions(streams)) {
                            ReadOnlySessionStore<Object, Object> sessions = streams.store(StoreQueryParameters.fromNameAndType(
                                    store, QueryableStoreTypes.<Object, Object>sessionStore()).withPartition(partition));
                            try (KeyValueIterator<Windowed<Object>, Object> all = sessions.findSessions(null, null, 0L, Long.MAX_VALUE)) {
                                appendWindowed(sessionsJson, all);
                            }
                        }
                        return sessionsJson.append("]").toString();
                    case "versioned":
                        return versioned(streams, store, keys);
                    default:
                        throw new IllegalArgumentException("no store kind " + kind);
                }
            } catch (InvalidStateStoreException notYet) {
                if (System.nanoTime() > deadline) {
                    throw notYet;
                }
                Thread.sleep(100);
            }
        }
    }

    /**
     * A versioned store's latest version of each key, {"key": {"value", "timestamp"}} (a key
     * without one left out), by Interactive Queries v2 (VersionedKeyQuery); not yet answerable
     * (a rebalance) is an InvalidStateStoreException, as the first-generation queries throw.
     */
    static String versioned(KafkaStreams streams, String store, String[] keys) {
        StringBuilder json = new StringBuilder("{");
        for (String key : keys) {
            StateQueryResult<VersionedRecord<String>> result = streams.query(StateQueryRequest.inStore(store)
                    .withQuery(VersionedKeyQuery.<String, String>withKey(key)).requireActive());
            for (QueryResult<VersionedRecord<String>> partition : result.getPartitionResults().values()) {
                if (partition.isFailure()) {
                    throw new InvalidStateStoreException(partition.getFailureMessage());
                }
                VersionedRecord<String> latest = partition.getResult();
                if (latest != null) {
                    json.append(json.length() > 1 ? ", " : "").append(quoted(key)).append(": {\"value\": ")
                            .append(quoted(latest.value())).append(", \"timestamp\": ").append(latest.timestamp()).append("}");
                }
            }
        }
        return json.append("}").toString();
    }

    /** The partitions this instance's active tasks read (of any source topic). */
    static SortedSet<Integer> localPartitions(KafkaStreams streams) {
        SortedSet<Integer> partitions = new TreeSet<>();
        for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
            for (TaskMetadata task : thread.activeTasks()) {
                task.topicPartitions().forEach(partition -> partitions.add(partition.partition()));
            }
        }
        return partitions;
    }

    static String keyValues(KeyValueIterator<Object, Object> entries) {
        StringBuilder json = new StringBuilder("{");
        while (entries.hasNext()) {
            KeyValue<Object, Object> entry = entries.next();
            json.append(json.length() > 1 ? ", " : "").append(quoted(String.valueOf(entry.key)))
                    .append(": ").append(jsonValue(entry.value));
        }
        return json.append("}").toString();
    }

    /** Each entry as {"key", "start", "end", "value"}, after what json holds ("[" or entries). */
    static void appendWindowed(StringBuilder json, KeyValueIterator<Windowed<Object>, Object> entries) {
        while (entries.hasNext()) {
            KeyValue<Windowed<Object>, Object> entry = entries.next();
            json.append(json.length() > 1 ? ", " : "").append("{\"key\": ").append(quoted(String.valueOf(entry.key.key())))
                    .append(", \"start\": ").append(entry.key.window().start())
                    .append(", \"end\": ").append(entry.key.window().end())
                    .append(", \"value\": ").append(jsonValue(entry.value)).append("}");
        }
    }

    static String jsonValue(Object value) {
        return value instanceof Number ? value.toString() : quoted(String.valueOf(value));
    }

    static String quoted(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
