import type { DelegatedEntry, DirectEntry, IdentifierType, StepUpConfig } from "./config.js";

export type Resolution =
  { kind: "direct"; entry: DirectEntry } | { kind: "delegated"; entry: DelegatedEntry } | { kind: "none" };

/**
 * Which entry answers a step-up request, by docs/session-api.md#step-up-request-rules: the
 * first direct entry, in declaration order, whose scope matches and whose identifier types
 * overlap those the user holds; else the scope's delegated entry (at most one exists); else none.
 */
export function decide(config: StepUpConfig, scope: string, held: ReadonlySet<IdentifierType>): Resolution {
  const direct = config.entries.find(
    (e): e is DirectEntry =>
      e.mode === "direct" && e.scope === scope && e.identifierTypes.some((t) => held.has(t)),
  );
  if (direct !== undefined) return { kind: "direct", entry: direct };
  const delegated = config.entries.find(
    (e): e is DelegatedEntry => e.mode === "delegated" && e.scope === scope,
  );
  if (delegated !== undefined) return { kind: "delegated", entry: delegated };
  return { kind: "none" };
}
