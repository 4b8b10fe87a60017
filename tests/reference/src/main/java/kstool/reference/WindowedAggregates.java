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
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Reducer;
import org.apache.kafka.streams.kstream.SessionWindowedKStream;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindowedKStream;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The twin of {@code kstool run aggregate --window}: an aggregate per key and window of topic
 * {@code input}, written to {@code output} with the window as the key's JSON ({@code {"key",
 * "start", "end"}}) and the aggregate as text. A case: {@code "window": {"type":
 * tumbling|hopping|sliding|session, "size", "advance", "grace", "retention"}, "agg":
 * count|sum|min|max|avg|concat|latest, "separator", "emit": update|final, "final":
 * suppress|on-window-close, "group_by": {"separator", "index"}} (durations in ms; values read as
 * longs, by concat and latest as texts; group_by: re-keyed by a field of the value split at the
 * separator, kstool's {@code --group-by split:SEP:N}).
 */
final class WindowedAggregates {
    private static final ObjectMapper JSON = new ObjectMapper();

    private WindowedAggregates() {
    }

    static void build(final StreamsBuilder builder, final JsonNode spec) {
        final KStream<String, String> input = builder.stream(Twin.INPUT, Consumed.with(Serdes.String(), Serdes.String()));
        final KGroupedStream<String, String> grouped = spec.has("group_by")  // kstool's --group-by split:SEP:N
                ? input.groupBy((key, value) -> Joins.field(spec.get("group_by"), value),
                        Grouped.with(Serdes.String(), Serdes.String()))
                : input.groupByKey();
        aggregate(grouped, spec).toStream()
                .map((windowed, aggregate) -> KeyValue.pair(windowedKey(windowed), aggregate))
                .to(Twin.OUTPUT, Produced.with(Serdes.String(), Serdes.String()));
    }

    private static KTable<Windowed<String>, String> aggregate(final KGroupedStream<String, String> grouped,
                                                              final JsonNode spec) {
        final JsonNode window = spec.get("window");
        final Duration grace = Duration.ofMillis(window.path("grace").asLong());
        final boolean emitFinal = "final".equals(spec.path("emit").asText("update"));
        final boolean onWindowClose = emitFinal && "on-window-close".equals(spec.path("final").asText("suppress"));
        final Aggregation aggregation = Aggregation.of(spec);
        final KTable<Windowed<String>, String> aggregates;
        switch (window.get("type").asText()) {
            case "session": {
                SessionWindowedKStream<String, String> sessions = grouped.windowedBy(
                        SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(window.get("size").asLong()), grace));
                if (onWindowClose) {
                    sessions = sessions.emitStrategy(EmitStrategy.onWindowClose());
                }
                final Materialized<String, String, SessionStore<Bytes, byte[]>> store =
                        Materialized.with(Serdes.String(), Serdes.String());
                aggregates = aggregation.reducer != null ? sessions.reduce(aggregation.reducer, store)
                        : sessions.aggregate(aggregation::initial, aggregation::add, aggregation::merge, store);
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
        final KTable<Windowed<String>, String> emitted = emitFinal && !onWindowClose
                ? aggregates.suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
                : aggregates;
        return aggregation.kind.equals("avg") ? emitted.mapValues(Aggregation::average) : emitted;
    }

    private static KTable<Windowed<String>, String> aggregate(final TimeWindowedKStream<String, String> windows,
                                                              final boolean onWindowClose, final JsonNode window,
                                                              final Aggregation aggregation) {
        final TimeWindowedKStream<String, String> emitting =
                onWindowClose ? windows.emitStrategy(EmitStrategy.onWindowClose()) : windows;
        Materialized<String, String, WindowStore<Bytes, byte[]>> store = Materialized.with(Serdes.String(), Serdes.String());
        if (window.has("retention")) {  // else the store's default: size + grace
            store = store.withRetention(Duration.ofMillis(window.get("retention").asLong()));
        }
        return aggregation.reducer != null ? emitting.reduce(aggregation.reducer, store)
                : emitting.aggregate(aggregation::initial, aggregation::add, store);
    }

    /**
     * count, sum, min, max of the values as longs (an aggregate as text; avg: "sum count", its
     * average once out of the store), or concat (joined by {@code "separator"}) and latest as a
     * reduce of the texts, as kstool's --agg says Kafka Streams would.
     */
    private static final class Aggregation {
        final String kind;
        final Reducer<String> reducer;

        private Aggregation(final String kind, final Reducer<String> reducer) {
            this.kind = kind;
            this.reducer = reducer;
        }

        static Aggregation of(final JsonNode spec) {
            final String kind = spec.path("agg").asText("count");
            final String separator = spec.path("separator").asText(",");
            return new Aggregation(kind, switch (kind) {
                case "concat" -> (left, right) -> left + separator + right;
                case "latest" -> (left, right) -> right;
                default -> null;
            });
        }

        String initial() {
            return switch (kind) {
                case "min" -> Long.toString(Long.MAX_VALUE);
                case "max" -> Long.toString(Long.MIN_VALUE);
                case "avg" -> "0 0";
                default -> "0";
            };
        }

        String add(final String key, final String value, final String aggregate) {
            if (kind.equals("avg")) {
                return merge(key, aggregate, value + " 1");
            }
            final long total = Long.parseLong(aggregate);
            return Long.toString(switch (kind) {
                case "count" -> total + 1;
                case "sum" -> total + Long.parseLong(value);
                case "min" -> Math.min(total, Long.parseLong(value));
                case "max" -> Math.max(total, Long.parseLong(value));
                default -> throw new IllegalArgumentException("no aggregation " + kind);
            });
        }

        String merge(final String key, final String left, final String right) {
            if (kind.equals("avg")) {
                final String[] one = left.split(" ");
                final String[] other = right.split(" ");
                return (Long.parseLong(one[0]) + Long.parseLong(other[0])) + " "
                        + (Long.parseLong(one[1]) + Long.parseLong(other[1]));
            }
            final long one = Long.parseLong(left);
            final long other = Long.parseLong(right);
            return Long.toString(switch (kind) {
                case "min" -> Math.min(one, other);
                case "max" -> Math.max(one, other);
                default -> one + other;
            });
        }

        static String average(final String sumAndCount) {
            final String[] parts = sumAndCount.split(" ");
            return Double.toString((double) Long.parseLong(parts[0]) / Long.parseLong(parts[1]));
        }
    }

    private static String windowedKey(final Windowed<String> windowed) {
        return JSON.createObjectNode().put("key", windowed.key()).put("start", windowed.window().start())
                .put("end", windowed.window().end()).toString();
    }
}
