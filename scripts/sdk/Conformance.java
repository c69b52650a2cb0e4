import com.helixor.clients.CredentialsGuardClient;
import com.helixor.clients.HelixorError;
import com.helixor.clients.InternalIdsClient;
import com.helixor.clients.Json;
import com.helixor.clients.RegulatoryPiiGuardClient;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiFunction;
import java.util.function.Function;

/**
 * The Java side of the typed-client conformance run (scripts/sdk-e2e.py):
 * drives the clients generated from the demo packs over a corpus and writes,
 * one JSON object per line, every decision as the typed records hold it.
 *
 * <p>Usage: {@code java -cp CLASSES Conformance BASE_URL CORPUS_FILE}, with
 * the generated package compiled into CLASSES.
 */
public final class Conformance {
    private static final Duration TIMEOUT = Duration.ofSeconds(30);

    private Conformance() {
    }

    /**
     * What the program needs of one pack's client, whose types differ per
     * pack: each call answers with the decisions already written back.
     */
    private record Pack(
            BiFunction<String, String, Map<String, Object>> evaluate,
            Function<List<String>, List<Map<String, Object>>> evaluateBatch,
            BiFunction<String, Long, Map<String, Object>> parse) {
    }

    /**
     * The pack's client, on {@code baseUrl} with {@code token}.
     *
     * @throws IllegalArgumentException for a pack no client was generated for
     */
    private static Pack client(String packId, String baseUrl, String token) {
        return switch (packId) {
            case RegulatoryPiiGuardClient.PACK_ID -> {
                var c = new RegulatoryPiiGuardClient(baseUrl, token, TIMEOUT);
                yield new Pack(
                        (text, normalize) -> written(c.evaluate(text, normalize)),
                        texts -> c.evaluateBatch(texts).stream().map(Conformance::written).toList(),
                        (json, generation) -> written(RegulatoryPiiGuardClient.Decision.parse(json, generation)));
            }
            case InternalIdsClient.PACK_ID -> {
                var c = new InternalIdsClient(baseUrl, token, TIMEOUT);
                yield new Pack(
                        (text, normalize) -> written(c.evaluate(text, normalize)),
                        texts -> c.evaluateBatch(texts).stream().map(Conformance::written).toList(),
                        (json, generation) -> written(InternalIdsClient.Decision.parse(json, generation)));
            }
            case CredentialsGuardClient.PACK_ID -> {
                var c = new CredentialsGuardClient(baseUrl, token, TIMEOUT);
                yield new Pack(
                        (text, normalize) -> written(c.evaluate(text, normalize)),
                        texts -> c.evaluateBatch(texts).stream().map(Conformance::written).toList(),
                        (json, generation) -> written(CredentialsGuardClient.Decision.parse(json, generation)));
            }
            default -> throw new IllegalArgumentException("no client was generated for pack " + packId);
        };
    }

    // One `written` per pack's Decision type: the records have the same
    // shape but no common supertype.

    private static Map<String, Object> written(RegulatoryPiiGuardClient.Decision d) {
        List<Map<String, Object>> triggers = new ArrayList<>();
        List<Boolean> known = new ArrayList<>();
        for (var t : d.triggers()) {
            List<List<Integer>> spans = t.spans().stream().map(s -> List.of(s.start(), s.end())).toList();
            triggers.add(trigger(t.ruleIdRaw(), t.source(), t.severityRaw(), t.actionRaw(), t.codons(), t.matchCount(), spans));
            known.add(t.ruleId() != RegulatoryPiiGuardClient.RuleId.UNKNOWN);
        }
        return decision(d.actionRaw(), d.severityRaw(), d.reason(), d.cleanText(), triggers, d.invariantsPassed(),
                d.packId(), d.packVersion(), d.receiptHash(), d.latencyUs(), d.generation(), d.normalized(),
                d.blocked(), d.redacted(), d.action() != RegulatoryPiiGuardClient.Action.UNKNOWN, known);
    }

    private static Map<String, Object> written(InternalIdsClient.Decision d) {
        List<Map<String, Object>> triggers = new ArrayList<>();
        List<Boolean> known = new ArrayList<>();
        for (var t : d.triggers()) {
            List<List<Integer>> spans = t.spans().stream().map(s -> List.of(s.start(), s.end())).toList();
            triggers.add(trigger(t.ruleIdRaw(), t.source(), t.severityRaw(), t.actionRaw(), t.codons(), t.matchCount(), spans));
            known.add(t.ruleId() != InternalIdsClient.RuleId.UNKNOWN);
        }
        return decision(d.actionRaw(), d.severityRaw(), d.reason(), d.cleanText(), triggers, d.invariantsPassed(),
                d.packId(), d.packVersion(), d.receiptHash(), d.latencyUs(), d.generation(), d.normalized(),
                d.blocked(), d.redacted(), d.action() != InternalIdsClient.Action.UNKNOWN, known);
    }

    private static Map<String, Object> written(CredentialsGuardClient.Decision d) {
        List<Map<String, Object>> triggers = new ArrayList<>();
        List<Boolean> known = new ArrayList<>();
        for (var t : d.triggers()) {
            List<List<Integer>> spans = t.spans().stream().map(s -> List.of(s.start(), s.end())).toList();
            triggers.add(trigger(t.ruleIdRaw(), t.source(), t.severityRaw(), t.actionRaw(), t.codons(), t.matchCount(), spans));
            known.add(t.ruleId() != CredentialsGuardClient.RuleId.UNKNOWN);
        }
        return decision(d.actionRaw(), d.severityRaw(), d.reason(), d.cleanText(), triggers, d.invariantsPassed(),
                d.packId(), d.packVersion(), d.receiptHash(), d.latencyUs(), d.generation(), d.normalized(),
                d.blocked(), d.redacted(), d.action() != CredentialsGuardClient.Action.UNKNOWN, known);
    }

    private static Map<String, Object> trigger(String ruleId, String source, String severity, String action,
            List<String> codons, int matchCount, List<List<Integer>> spans) {
        Map<String, Object> t = new LinkedHashMap<>();
        t.put("rule_id", ruleId);
        t.put("source", source);
        t.put("severity", severity);
        t.put("action", action);
        t.put("codons", codons);
        t.put("match_count", matchCount);
        t.put("spans", spans);
        return t;
    }

    private static Map<String, Object> decision(String action, String severity, String reason, String cleanText,
            List<Map<String, Object>> triggers, boolean invariantsPassed, String packId, String packVersion,
            String receiptHash, double latencyUs, long generation, boolean normalized, boolean blocked,
            boolean redacted, boolean actionKnown, List<Boolean> ruleIdsKnown) {
        Map<String, Object> d = new LinkedHashMap<>();
        d.put("action", action);
        d.put("severity", severity);
        d.put("reason", reason);
        d.put("clean_text", cleanText);
        d.put("triggers", triggers);
        d.put("invariants_passed", invariantsPassed);
        d.put("pack_id", packId);
        d.put("pack_version", packVersion);
        d.put("receipt_hash", receiptHash);
        d.put("latency_us", latencyUs);
        d.put("generation", generation);
        d.put("normalized", normalized);
        d.put("blocked", blocked);
        d.put("redacted", redacted);
        d.put("action_known", actionKnown);
        d.put("rule_ids_known", ruleIdsKnown);
        return d;
    }

    private static Map<String, Object> line(String kind, int i) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("kind", kind);
        line.put("i", i);
        return line;
    }

    private static Map<?, ?> object(Object value, String what) {
        if (value instanceof Map<?, ?> map) {
            return map;
        }
        throw new IllegalArgumentException("the corpus: " + what + " is not an object");
    }

    private static List<?> list(Object value, String what) {
        if (value instanceof List<?> items) {
            return items;
        }
        throw new IllegalArgumentException("the corpus: " + what + " is not an array");
    }

    /** A string member, or null when it is null or absent. */
    private static String string(Map<?, ?> object, String name) {
        Object value = object.get(name);
        if (value == null || value instanceof String) {
            return (String) value;
        }
        throw new IllegalArgumentException("the corpus: `" + name + "` is not a string");
    }

    /**
     * Runs the corpus.
     *
     * @param args BASE_URL CORPUS_FILE
     * @throws IOException if the corpus cannot be read
     */
    public static void main(String[] args) throws IOException {
        if (args.length != 2) {
            System.err.println("usage: java Conformance BASE_URL CORPUS_FILE");
            System.exit(2);
        }
        String baseUrl = args[0];
        Map<?, ?> corpus = object(Json.parse(Files.readString(Path.of(args[1]))), "the corpus");
        String token = string(corpus, "token");
        // UTF-8 whatever the locale: the texts are not all ASCII.
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        Map<String, Pack> clients = new HashMap<>();

        List<?> cases = list(corpus.get("cases"), "cases");
        for (int i = 0; i < cases.size(); i++) {
            Map<?, ?> c = object(cases.get(i), "a case");
            String packId = string(c, "pack_id");
            Pack pack = clients.computeIfAbsent(packId, id -> client(id, baseUrl, token));
            Map<String, Object> line = line("case", i);
            line.put("decision", pack.evaluate().apply(string(c, "text"), string(c, "normalize")));
            out.println(Json.write(line));
        }

        List<?> batches = list(corpus.get("batches"), "batches");
        for (int i = 0; i < batches.size(); i++) {
            Map<?, ?> b = object(batches.get(i), "a batch");
            List<String> texts = new ArrayList<>();
            for (Object text : list(b.get("texts"), "a batch's texts")) {
                if (!(text instanceof String s)) {
                    throw new IllegalArgumentException("the corpus: a batch text is not a string");
                }
                texts.add(s);
            }
            Pack pack = clients.computeIfAbsent(string(b, "pack_id"), id -> client(id, baseUrl, token));
            Map<String, Object> line = line("batch", i);
            line.put("decisions", pack.evaluateBatch().apply(texts));
            out.println(Json.write(line));
        }

        List<?> errors = list(corpus.get("errors"), "errors");
        for (int i = 0; i < errors.size(); i++) {
            Map<?, ?> e = object(errors.get(i), "an error case");
            String base = string(e, "base_url");
            Pack pack = client(string(e, "pack_id"), base == null ? baseUrl : base, string(e, "token"));
            Map<String, Object> line = line("error", i);
            try {
                pack.evaluate().apply(string(e, "text"), null);
                line.put("name", null);
            } catch (HelixorError err) {
                line.put("name", err.name());
                line.put("status", err.status());
                line.put("message", err.getMessage());
            }
            out.println(Json.write(line));
        }

        List<?> unknown = list(corpus.get("unknown"), "unknown");
        for (int i = 0; i < unknown.size(); i++) {
            Map<?, ?> u = object(unknown.get(i), "an unknown case");
            Map<?, ?> decision = object(u.get("decision"), "an unknown case's decision");
            if (!(decision.get("generation") instanceof Long generation)) {
                throw new IllegalArgumentException("the corpus: an unknown case's decision has no integer generation");
            }
            Pack pack = clients.computeIfAbsent(string(u, "pack_id"), id -> client(id, baseUrl, token));
            Map<String, Object> line = line("unknown", i);
            line.put("decision", pack.parse().apply(Json.write(decision), generation));
            out.println(Json.write(line));
        }
        out.flush();
        if (out.checkError()) {
            System.exit(1);
        }
    }
}
