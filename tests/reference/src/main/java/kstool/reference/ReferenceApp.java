package kstool.reference;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.InvalidStateStoreException;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;

/**
 * A Kafka Streams application of the tests, by name, against a real broker:
 * {@code ReferenceApp APP BOOTSTRAP APPLICATION_ID GROUP_PROTOCOL STATE_DIR INPUT OUTPUT [NAME=VALUE...]}
 * (the NAME=VALUE pairs: more StreamsConfig settings).
 * It prints its topology's describe() text between "topology:" and "end-topology", then
 * "state RUNNING" (and every later state), and reads commands on stdin: "query STORE FILE" writes
 * what Interactive Queries return for the store as JSON ({"key": value, ...}) and prints
 * "queried FILE"; "stop" (or the end of stdin) closes the app and exits.
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
                if (words.length == 3 && words[0].equals("query")) {
                    Files.writeString(Path.of(words[2]), queryKeyValueStore(streams, words[1]));
                    System.out.println("queried " + words[2]);
                } else {
                    System.out.println("unknown command " + Arrays.toString(words));
                }
                System.out.flush();
            }
        }
        streams.close(Duration.ofSeconds(30));
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

    /** The store's entries as a JSON object, once the store can be queried (after a rebalance). */
    static String queryKeyValueStore(KafkaStreams streams, String store) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (true) {
            try {
                ReadOnlyKeyValueStore<Object, Object> view = streams.store(
                        StoreQueryParameters.fromNameAndType(store, QueryableStoreTypes.keyValueStore()));
                StringBuilder json = new StringBuilder("{");
                try (KeyValueIterator<Object, Object> entries = view.all()) {
                    while (entries.hasNext()) {
                        KeyValue<Object, Object> entry = entries.next();
                        json.append(json.length() > 1 ? ", " : "").append(quoted(String.valueOf(entry.key)))
                                .append(": ").append(jsonValue(entry.value));
                    }
                }
                return json.append("}").toString();
            } catch (InvalidStateStoreException notYet) {
                if (System.nanoTime() > deadline) {
                    throw notYet;
                }
                Thread.sleep(100);
            }
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
