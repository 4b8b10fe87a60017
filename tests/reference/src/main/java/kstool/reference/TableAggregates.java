package kstool.reference;

import java.time.Duration;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedTable;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Suppressed;

/**
 * The twin of {@code kstool run table-aggregate}: the table {@code input} re-grouped by
 * {@code "group_field"} of its JSON value ({@code --group-by field:PATH}) or else by field
 * {@code index} of the value split at {@code separator} ({@code split:SEP:N}; none: the row has
 * no group), counted or summed ({@code "sum_field"} of the JSON value, a long), optionally
 * suppressed ({@code "suppress_ms"}, {@code "suppress_records"}: untilTimeLimit with
 * maxRecords(N).emitEarlyWhenFull()), written to {@code output} with the aggregate as text. With
 * {@code "history"} (ms) the table is versioned (kstool's {@code --table-history}).
 */
final class TableAggregates {
    private static final ObjectMapper JSON = new ObjectMapper();

    private TableAggregates() {
    }

    static void build(final StreamsBuilder builder, final JsonNode spec) {
        final KTable<String, String> table = Joins.table(builder, Twin.INPUT, spec);
        final KGroupedTable<String, String> grouped = table.groupBy(
                (key, value) -> KeyValue.pair(group(spec, value), value),
                Grouped.with(Serdes.String(), Serdes.String()));
        final boolean sum = "sum".equals(spec.path("agg").asText("count"));
        KTable<String, Long> aggregates = sum
                ? grouped.aggregate(() -> 0L, (group, value, total) -> total + number(spec, value),
                        (group, value, total) -> total - number(spec, value),
                        Materialized.with(Serdes.String(), Serdes.Long()))
                : grouped.count(Materialized.with(Serdes.String(), Serdes.Long()));
        if (spec.has("suppress_ms") || spec.has("suppress_records")) {
            Suppressed.BufferConfig<?> buffer = Suppressed.BufferConfig.unbounded();
            if (spec.has("suppress_records")) {
                buffer = Suppressed.BufferConfig.maxRecords(spec.get("suppress_records").asLong()).emitEarlyWhenFull();
            }
            final Duration limit = spec.has("suppress_ms")
                    ? Duration.ofMillis(spec.get("suppress_ms").asLong()) : Duration.ofMillis(Long.MAX_VALUE);
            aggregates = aggregates.suppress(Suppressed.untilTimeLimit(limit, buffer));
        }
        aggregates.toStream()
                .mapValues(total -> total == null ? null : total.toString())
                .to(Twin.OUTPUT, Produced.with(Serdes.String(), Serdes.String()));
    }

    private static String group(final JsonNode spec, final String value) {
        if (!spec.has("group_field")) {
            return Joins.field(spec, value);
        }
        final JsonNode found = json(value).path(spec.get("group_field").asText());
        return found.isMissingNode() || found.isNull() ? null : found.asText();
    }

    private static long number(final JsonNode spec, final String value) {
        return json(value).get(spec.get("sum_field").asText()).asLong();
    }

    private static JsonNode json(final String value) {
        try {
            return JSON.readTree(value);
        } catch (final java.io.IOException notJson) {
            throw new IllegalArgumentException(notJson);
        }
    }
}
