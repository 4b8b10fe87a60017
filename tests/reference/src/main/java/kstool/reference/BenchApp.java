package kstool.reference;

import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.WindowedSerdes;

/**
 * Kafka Streams beside kstool in the bench (bench/kafka_streams.py): one step's topology over
 * topics already loaded, run until it has read EXPECTED input records, then closed (its record
 * caches flushed, its output written, its offsets committed).
 * {@code BenchApp STEP BOOTSTRAP APPLICATION_ID STATE_DIR CACHE_BYTES EXPECTED OUTPUT INPUT [RIGHT_INPUT]}
 * STEP: count, tumbling, tumbling-final, hopping, session (1 s windows, hopping 5 s by 1 s, no
 * grace: kstool's defaults), stream-stream (inner, within 1 min), stream-table (left),
 * table-table (outer). CACHE_BYTES: statestore.cache.max.bytes (0: every update written).
 * Prints one JSON line: input and output records, seconds from the first input record read to
 * the close done, and to the last input record processed.
 */
public final class BenchApp {
    private static final Serde<String> TEXT = Serdes.String();
    private static final Duration SECOND = Duration.ofSeconds(1);

    private final AtomicLong read = new AtomicLong();
    private final AtomicLong written = new AtomicLong();
    private final CountDownLatch allRead = new CountDownLatch(1);
    private final long expected;
    private volatile long firstNanos;
    private volatile long lastNanos;

    private BenchApp(long expected) {
        this.expected = expected;
    }

    public static void main(String[] args) throws InterruptedException {
        if (args.length < 8) {
            System.err.println("usage: BenchApp STEP BOOTSTRAP APPLICATION_ID STATE_DIR CACHE_BYTES EXPECTED OUTPUT INPUT [RIGHT_INPUT]");
            System.exit(2);
        }
        String step = args[0];
        BenchApp bench = new BenchApp(Long.parseLong(args[5]));
        StreamsBuilder builder = new StreamsBuilder();
        bench.build(builder, step, args[6], Arrays.copyOfRange(args, 7, args.length));

        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[2]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[3]);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, args[4]);
        // two input partitions, two tasks: a thread each, as kstool's local[2] has two cores
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 2);
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setUncaughtExceptionHandler(error -> {
            System.err.println("BenchApp: " + error);
            System.exit(1);
            return null;
        });
        streams.start();
        if (!bench.allRead.await(30, TimeUnit.MINUTES)) {
            System.err.println("BenchApp: read " + bench.read.get() + " of " + bench.expected + " records in 30 minutes");
            System.exit(1);
        }
        streams.close(Duration.ofMinutes(5));
        long closed = System.nanoTime();
        System.out.printf("{\"records\": %d, \"output_records\": %d, \"seconds\": %.3f, \"processed_seconds\": %.3f}%n",
            bench.read.get(), bench.written.get(), (closed - bench.firstNanos) / 1e9,
            (bench.lastNanos - bench.firstNanos) / 1e9);
    }

    private void build(StreamsBuilder builder, String step, String output, String[] inputs) {
        KStream<String, String> left = counted(builder.stream(inputs[0], Consumed.with(TEXT, TEXT)));
        switch (step) {
            case "count" -> written(left.groupByKey().count().toStream())
                .to(output, Produced.with(TEXT, Serdes.Long()));
            case "tumbling" -> written(left.groupByKey().windowedBy(TimeWindows.ofSizeWithNoGrace(SECOND))
                .count().toStream())
                .to(output, Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, 1000), Serdes.Long()));
            case "tumbling-final" -> written(left.groupByKey().windowedBy(TimeWindows.ofSizeWithNoGrace(SECOND))
                .count().suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded())).toStream())
                .to(output, Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, 1000), Serdes.Long()));
            case "hopping" -> written(left.groupByKey()
                .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofSeconds(5)).advanceBy(SECOND)).count().toStream())
                .to(output, Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, 5000), Serdes.Long()));
            case "session" -> written(left.groupByKey().windowedBy(SessionWindows.ofInactivityGapWithNoGrace(SECOND))
                .count().toStream())
                .to(output, Produced.with(WindowedSerdes.sessionWindowedSerdeFrom(String.class), Serdes.Long()));
            case "stream-stream" -> written(left.join(counted(builder.stream(inputs[1], Consumed.with(TEXT, TEXT))),
                    (l, r) -> l + "," + r, JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofMinutes(1)),
                    StreamJoined.with(TEXT, TEXT, TEXT)))
                .to(output, Produced.with(TEXT, TEXT));
            case "stream-table" -> written(left.leftJoin(table(builder, inputs[1]), (l, r) -> l + "," + r))
                .to(output, Produced.with(TEXT, TEXT));
            case "table-table" -> written(left.toTable().outerJoin(table(builder, inputs[1]), (l, r) -> l + "," + r)
                .toStream())
                .to(output, Produced.with(TEXT, TEXT));
            default -> throw new IllegalArgumentException("unknown step " + step);
        }
    }

    /** A table whose input records are counted as they are read (so a stream turned into one). */
    private KTable<String, String> table(StreamsBuilder builder, String topic) {
        return counted(builder.stream(topic, Consumed.with(TEXT, TEXT))).toTable();
    }

    private <K, V> KStream<K, V> counted(KStream<K, V> input) {
        return input.peek((key, value) -> {
            long now = System.nanoTime();
            long seen = read.incrementAndGet();
            if (seen == 1) {
                firstNanos = now;
            }
            if (seen == expected) {
                lastNanos = now;
                allRead.countDown();
            }
        });
    }

    private <K, V> KStream<K, V> written(KStream<K, V> output) {
        return output.peek((key, value) -> written.incrementAndGet());
    }
}
