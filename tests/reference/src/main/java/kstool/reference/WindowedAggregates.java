package kstool.reference;

import java.time.Duration;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
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

/**
 * The twin of {@code kstool run aggregate --window}: an aggregate per key and window of topic
 * {@code input}, written to {@code output} with the window as the key's JSON ({@code {"key",
 * "start", "end"}}) and the aggregate as text. A case: {@code "window": {"type":
 * tumbling|hopping|sliding|session, "size", "advance", "grace", "retention"}, "agg":
 * count|sum|min|max, "emit": update|final, "final": suppress|on-window-close} (durations in ms;
 * values read as longs).
 */
final class WindowedAggregates {
    private static final ObjectMapper JSON = new ObjectMapper();

    private WindowedAggregates() {
    }

    static void build(final StreamsBuilder builder, final JsonNode spec) {
        final KGroupedStream<String, String> grouped =
                builder.stream(Twin.INPUT, Consumed.with(Serdes.String(), Serdes.String())).groupByKey();
        aggregate(grouped, spec).toStream()
                .map((windowed, aggregate) -> KeyValue.pair(windowedKey(windowed),
                        aggregate == null ? null : aggregate.toString()))
                .to(Twin.OUTPUT, Produced.with(Serdes.String(), Serdes.String()));
    }

    private static KTable<Windowed<String>, Long> aggregate(final KGroupedStream<String, String> grouped,
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

    private static String windowedKey(final Windowed<String> windowed) {
        return JSON.createObjectNode().put("key", windowed.key()).put("start", windowed.window().start())
                .put("end", windowed.window().end()).toString();
    }
}
