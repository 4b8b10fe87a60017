package kstool.reference;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.test.TestRecord;

/**
 * Kafka Streams as the tests' oracle: kstool's topologies built with Kafka Streams' DSL
 * ({@link WindowedAggregates}, {@link Joins}, {@link TableAggregates}) and run in its TopologyTestDriver, record caches off
 * (every update forwarded) unless a case asks for them. One JVM serves many cases: each stdin line is a case as JSON, each
 * stdout line its answer, {@code {"id", "records": [{"key", "value", "timestamp", "headers"}]}} (the
 * output topic's records, in order; headers as {@code [[key, value]]}) or {@code {"id", "error"}}.
 *
 * <p>A case: its topology's options (a {@code "window"}: a windowed aggregate; {@code "kind":
 * "table-aggregate"}; else a join),
 * {@code "cache": true} for the record cache, and {@code "records": [[topic, key, value,
 * timestamp(, headers)]]}, piped in that order (null: none; headers as {@code [[key, value]]}). One case is one task: one partition of each input.
 */
public final class Twin {
    static final String INPUT = "input";
    static final String OUTPUT = "output";

    private Twin() {
    }

    /** {@code Twin STATE_DIR}: the drivers' stores live there (one folder per JVM: RocksDB locks it). */
    public static void main(final String[] args) throws Exception {
        final String stateDir = args[0];
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
                answer.set("records", run(spec, json, stateDir));
            } catch (final RuntimeException failed) {
                answer.put("error", causes(failed));
            }
            out.println(json.writeValueAsString(answer));
        }
    }

    private static ArrayNode run(final JsonNode spec, final ObjectMapper json, final String stateDir) {
        final StreamsBuilder builder = new StreamsBuilder();
        if (spec.has("window")) {
            WindowedAggregates.build(builder, spec);
        } else if ("table-aggregate".equals(spec.path("kind").asText())) {
            TableAggregates.build(builder, spec);
        } else {
            Joins.build(builder, spec);
        }
        final Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "twin");
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        // the driver commits after each record: with "cache" the record cache merges a record's
        // updates of a key into one, as kstool's micro-batch of one record does; else every update
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, spec.path("cache").asBoolean() ? 10L << 20 : 0L);
        // results held back for a later time (onWindowClose, left and outer joins' null results)
        // go out at most once per interval of wall-clock time, which the driver does not advance
        props.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION, 0L);
        props.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_OUTER_JOIN_SPURIOUS_RESULTS_FIX, 0L);
        final ArrayNode records = json.createArrayNode();
        try (TopologyTestDriver driver = new TopologyTestDriver(builder.build(), props)) {
            final Map<String, TestInputTopic<String, String>> inputs = new HashMap<>();
            for (final JsonNode record : spec.get("records")) {
                final String topic = record.get(0).asText();
                inputs.computeIfAbsent(topic, name -> driver.createInputTopic(
                                name, Serdes.String().serializer(), Serdes.String().serializer()))
                        .pipeInput(new TestRecord<>(text(record.get(1)), text(record.get(2)), headers(record.get(4)),
                                record.get(3).asLong()));
            }
            final TestOutputTopic<String, String> output =
                    driver.createOutputTopic(OUTPUT, Serdes.String().deserializer(), Serdes.String().deserializer());
            for (final TestRecord<String, String> record : output.readRecordsToList()) {
                final ArrayNode headers = json.createArrayNode();
                for (final Header header : record.headers()) {
                    headers.add(json.createArrayNode().add(header.key())
                            .add(header.value() == null ? null : new String(header.value(), StandardCharsets.UTF_8)));
                }
                records.add(json.createObjectNode().put("key", record.key()).put("value", record.value())
                        .put("timestamp", record.timestamp()).set("headers", headers));
            }
        }
        return records;
    }

    /** The exception, its causes, and where the root one was thrown ("Caused by" alone hides it). */
    private static String causes(final Throwable failed) {
        final StringBuilder text = new StringBuilder(failed.toString());
        Throwable root = failed;
        while (root.getCause() != null) {
            root = root.getCause();
            text.append(" <- ").append(root);
        }
        final StackTraceElement[] frames = root.getStackTrace();
        for (int i = 0; i < Math.min(frames.length, 8); i++) {
            text.append(i == 0 ? " at " : " < ").append(frames[i]);
        }
        return text.toString();
    }

    private static Headers headers(final JsonNode given) {
        final Headers headers = new RecordHeaders();
        if (given != null) {
            for (final JsonNode header : given) {
                headers.add(header.get(0).asText(),
                        header.get(1).isNull() ? null : header.get(1).asText().getBytes(StandardCharsets.UTF_8));
            }
        }
        return headers;
    }

    private static String text(final JsonNode node) {
        return node.isNull() ? null : node.asText();
    }
}
