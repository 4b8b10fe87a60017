package kstool.reference;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindowedKStream;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindowedKStream;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.WindowStore;
import org.apache.kafka.streams.test.TestRecord;

/**
 * Kafka Streams as the tests' oracle: kstool's topologies built with Kafka Streams' DSL and run in
 * its TopologyTestDriver, record caches off (every update forwarded). One JVM serves many cases:
 * each stdin line is a case as JSON, each stdout line its answer,
 * {@code {"id", "records": [{"key", "start", "end", "value", "timestamp"}]}} or {@code {"id", "error"}}.
 *
 * <p>A case: {@code {"id", "window": {"type": tumbling|hopping|sliding|session, "size", "advance",
 * "grace", "retention"}, "agg": count|sum|min|max, "emit": update|final, "final": suppress|on-window-close,
 * "records": [[key, value, ts]]}} (durations in ms): an aggregate per key and window of one input
 * partition (one task), values read as longs.
 */
public final class Twin {
    private static final String INPUT = "input";
    private static final String OUTPUT = "output";

    private Twin() {
    }

    public static void main(final String[] args) throws Exception {
        final ObjectMapper json = new ObjectMapper();
        final BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        final PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            final JsonNode spec = json.readTree(line);
            final ObjectNode answer = json.createObjectNode().put("id", spec.path("id").asLong());
            try {
                answer.set("records", run(spec, json));
            } catch (final RuntimeException failed) {
                answer.put("error", failed.toString());
            }
            out.println(json.writeValueAsString(answer));
        }
    }

    private static ArrayNode run(final JsonNode spec, final ObjectMapper json) {
        final StreamsBuilder builder = new StreamsBuilder();
        final KGroupedStream<String, String> grouped =
                builder.stream(INPUT, Consumed.with(Serdes.String(), Serdes.String())).groupByKey();
        windowedAggregate(grouped, spec).toStream()
                .map((windowed, count) -> KeyValue.pair(windowedKey(json, windowed), count))
                .to(OUTPUT, Produced.with(Serdes.String(), Serdes.Long()));
        final Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "twin");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        // onWindowClose emits at most once per interval of wall-clock time, which the driver does not advance
        props.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION, 0L);
        final ArrayNode records = json.createArrayNode();
        try (TopologyTestDriver driver = new TopologyTestDriver(builder.build(), props)) {
            final TestInputTopic<String, String> input =
                    driver.createInputTopic(INPUT, Serdes.String().serializer(), Serdes.String().serializer());
            final TestOutputTopic<String, Long> output =
                    driver.createOutputTopic(OUTPUT, Serdes.String().deserializer(), Serdes.Long().deserializer());
            for (final JsonNode record : spec.get("records")) {
                input.pipeInput(record.get(0).asText(), record.get(1).asText(), record.get(2).asLong());
            }
            for (final TestRecord<String, Long> record : output.readRecordsToList()) {
                final ObjectNode row = (ObjectNode) readTree(json, record.key());
                if (record.value() == null) {
                    row.putNull("value");
                } else {
                    row.put("value", record.value());
                }
                records.add(row.put("timestamp", record.timestamp()));
            }
        }
        return records;
    }

    private static KTable<Windowed<String>, Long> windowedAggregate(final KGroupedStream<String, String> grouped,
                                                                    final JsonNode spec) {
        final JsonNode window = spec.get("window");
        final Duration grace = Duration.ofMillis(window.path("grace").asLong());
        final boolean emitFinal = "final".equals(spec.path("emit").asText("update"));
        final boolean onWindowClose = emitFinal && "on-window-close".equals(spec.path("final").asText("suppress"));
        final Aggregation aggregation = new Aggregation(spec.path("agg").asText("count"));
        final KTable<Windowed<String>, Long> aggregates;
        switch (window.get("type").asText()) {
            case "session": {
                SessionWindowedKStream<String, String> sessions = grouped.windowedBy(
                        SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(window.get("size").asLong()), grace));
                if (onWindowClose) {
                    sessions = sessions.emitStrategy(EmitStrategy.onWindowClose());
                }
                aggregates = sessions.aggregate(aggregation::initial, aggregation::add, aggregation::merge,
                        Materialized.with(Serdes.String(), Serdes.Long()));
                break;
            }
            case "sliding":
                aggregates = aggregate(grouped.windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(
                        Duration.ofMillis(window.get("size").asLong()), grace)), onWindowClose, window, aggregation);
                break;
            default: {
                TimeWindows windows = TimeWindows.ofSizeAndGrace(Duration.ofMillis(window.get("size").asLong()), grace);
                if (window.has("advance")) {
                    windows = windows.advanceBy(Duration.ofMillis(window.get("advance").asLong()));
                }
                aggregates = aggregate(grouped.windowedBy(windows), onWindowClose, window, aggregation);
            }
        }
        return emitFinal && !onWindowClose
                ? aggregates.suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
                : aggregates;
    }

    private static KTable<Windowed<String>, Long> aggregate(final TimeWindowedKStream<String, String> windows,
                                                            final boolean onWindowClose, final JsonNode window,
                                                            final Aggregation aggregation) {
        final TimeWindowedKStream<String, String> emitting =
                onWindowClose ? windows.emitStrategy(EmitStrategy.onWindowClose()) : windows;
        Materialized<String, Long, WindowStore<Bytes, byte[]>> store = Materialized.with(Serdes.String(), Serdes.Long());
        if (window.has("retention")) {  // else the store's default: size + grace
            store = store.withRetention(Duration.ofMillis(window.get("retention").asLong()));
        }
        return emitting.aggregate(aggregation::initial, aggregation::add, store);
    }

    /** count, sum, min or max of the values as longs, as KGroupedStream#count and aggregate would. */
    private record Aggregation(String kind) {
        Long initial() {
            return switch (kind) {
                case "min" -> Long.MAX_VALUE;
                case "max" -> Long.MIN_VALUE;
                default -> 0L;
            };
        }

        Long add(final String key, final String value, final Long aggregate) {
            return switch (kind) {
                case "count" -> aggregate + 1;
                case "sum" -> aggregate + Long.parseLong(value);
                case "min" -> Math.min(aggregate, Long.parseLong(value));
                case "max" -> Math.max(aggregate, Long.parseLong(value));
                default -> throw new IllegalArgumentException("no aggregation " + kind);
            };
        }

        Long merge(final String key, final Long left, final Long right) {
            return switch (kind) {
                case "min" -> Math.min(left, right);
                case "max" -> Math.max(left, right);
                default -> left + right;
            };
        }
    }

    private static String windowedKey(final ObjectMapper json, final Windowed<String> windowed) {
        return json.createObjectNode().put("key", windowed.key()).put("start", windowed.window().start())
                .put("end", windowed.window().end()).toString();
    }

    private static JsonNode readTree(final ObjectMapper json, final String text) {
        try {
            return json.readTree(text);
        } catch (final java.io.IOException impossible) {
            throw new IllegalStateException(impossible);
        }
    }
}
