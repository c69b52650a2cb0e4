/**
 * The conformance program of the TypeScript clients (SPEC §18): runs a
 * corpus through the clients generated from the demo packs and writes one
 * JSON object per line, to be compared with the other languages' programs
 * and with the server's own answers.
 *
 *     node conformance.js BASE_URL CORPUS_FILE
 *
 * It is compiled together with the generated package: CI copies it into the
 * generated `src/` and runs `tsc` there, hence the `./index.js` import.
 *
 * @module
 */

import {
  CredentialsGuard,
  CredentialsGuardClient,
  HelixorError,
  InternalIds,
  InternalIdsClient,
  RegulatoryPiiGuard,
  RegulatoryPiiGuardClient,
  type ClientOptions,
  type Normalization,
} from "./index.js";

// The generated package has no dependency, not even @types/node: the few
// Node globals this program uses are declared here instead.
declare const process: {
  readonly argv: readonly string[];
  readonly stdout: { write(chunk: string): boolean };
  readonly stderr: { write(chunk: string): boolean };
  exitCode?: number;
};

/** The part of `node:fs` this program uses. */
interface NodeFs {
  readFileSync(path: string, encoding: "utf8"): string;
}

/** The corpus, as SPEC §18 describes it; every section may be absent. */
interface Corpus {
  readonly token?: string | null;
  readonly cases?: readonly {
    readonly pack_id: string;
    readonly text: string;
    readonly normalize?: Normalization | null;
  }[];
  readonly batches?: readonly { readonly pack_id: string; readonly texts: readonly string[] }[];
  readonly errors?: readonly {
    readonly pack_id: string;
    readonly text: string;
    readonly token?: string | null;
    readonly base_url?: string | null;
  }[];
  readonly unknown?: readonly { readonly pack_id: string; readonly decision: unknown }[];
}

/** Any pack's decision: their enum fields all widen to `string`. */
type Decision = RegulatoryPiiGuard.Decision | InternalIds.Decision | CredentialsGuard.Decision;

/** What this program calls on any pack's client. */
interface Client {
  evaluate(text: string, normalize?: Normalization): Promise<Decision>;
  evaluateBatch(texts: readonly string[]): Promise<Decision[]>;
}

/** One generated pack: its client class and the module's parse function and type guards. */
interface Pack {
  readonly client: { readonly PACK_ID: string; new (baseUrl: string, options?: ClientOptions): Client };
  readonly module: {
    parseDecision(value: unknown, generation?: number): Decision;
    isAction(value: unknown): boolean;
    isRuleId(value: unknown): boolean;
  };
}

const PACKS: ReadonlyMap<string, Pack> = new Map(
  [
    { client: RegulatoryPiiGuardClient, module: RegulatoryPiiGuard },
    { client: InternalIdsClient, module: InternalIds },
    { client: CredentialsGuardClient, module: CredentialsGuard },
  ].map((pack: Pack): [string, Pack] => [pack.client.PACK_ID, pack]),
);

function packOf(packId: string): Pack {
  const pack = PACKS.get(packId);
  // A corpus naming a pack no client serves cannot be run faithfully:
  // better to stop than to print a line that looks like a result.
  if (pack === undefined) {
    throw new Error(`the corpus names pack ${JSON.stringify(packId)}, which no generated client serves`);
  }
  return pack;
}

/** The typed decision written back under the server's member names, plus what the types know of it. */
function wire(decision: Decision, pack: Pack): Record<string, unknown> {
  return {
    action: decision.action,
    severity: decision.severity,
    reason: decision.reason,
    clean_text: decision.cleanText,
    triggers: decision.triggers.map((t) => ({
      rule_id: t.ruleId,
      source: t.source,
      severity: t.severity,
      action: t.action,
      codons: t.codons,
      match_count: t.matchCount,
      spans: t.spans,
    })),
    invariants_passed: decision.invariantsPassed,
    pack_id: decision.packId,
    pack_version: decision.packVersion,
    receipt_hash: decision.receiptHash,
    latency_us: decision.latencyUs,
    generation: decision.generation,
    normalized: decision.normalized,
    blocked: decision.blocked,
    redacted: decision.redacted,
    action_known: pack.module.isAction(decision.action),
    rule_ids_known: decision.triggers.map((t) => pack.module.isRuleId(t.ruleId)),
  };
}

function emit(line: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify(line) + "\n");
}

async function main(baseUrl: string, corpusFile: string): Promise<void> {
  // A specifier the compiler cannot resolve keeps it from looking for
  // @types/node; the result is typed by the declaration above.
  const fsModule: string = "node:fs";
  const fs = (await import(fsModule)) as NodeFs;
  // The corpus is the test's own input: its shape is trusted, not checked.
  const corpus = JSON.parse(fs.readFileSync(corpusFile, "utf8")) as Corpus;

  const options: ClientOptions = { token: corpus.token ?? undefined };
  const clients = new Map<string, Client>();
  const clientOf = (packId: string): [Client, Pack] => {
    const pack = packOf(packId);
    let client = clients.get(packId);
    if (client === undefined) {
      client = new pack.client(baseUrl, options);
      clients.set(packId, client);
    }
    return [client, pack];
  };

  for (const [i, c] of (corpus.cases ?? []).entries()) {
    const [client, pack] = clientOf(c.pack_id);
    const decision = await client.evaluate(c.text, c.normalize ?? undefined);
    emit({ kind: "case", i, decision: wire(decision, pack) });
  }

  for (const [i, b] of (corpus.batches ?? []).entries()) {
    const [client, pack] = clientOf(b.pack_id);
    const decisions = await client.evaluateBatch(b.texts);
    emit({ kind: "batch", i, decisions: decisions.map((d) => wire(d, pack)) });
  }

  for (const [i, e] of (corpus.errors ?? []).entries()) {
    const pack = packOf(e.pack_id);
    const client = new pack.client(e.base_url ?? baseUrl, { token: e.token ?? undefined });
    try {
      await client.evaluate(e.text);
      emit({ kind: "error", i, name: null });
    } catch (error) {
      if (!(error instanceof HelixorError)) throw error;
      emit({ kind: "error", i, name: error.errorName, status: error.status, message: error.message });
    }
  }

  for (const [i, u] of (corpus.unknown ?? []).entries()) {
    const pack = packOf(u.pack_id);
    emit({ kind: "unknown", i, decision: wire(pack.module.parseDecision(u.decision), pack) });
  }
}

const [baseUrl, corpusFile] = process.argv.slice(2);
if (baseUrl === undefined || corpusFile === undefined) {
  process.stderr.write("usage: node conformance.js BASE_URL CORPUS_FILE\n");
  process.exitCode = 2;
} else {
  await main(baseUrl, corpusFile);
}
