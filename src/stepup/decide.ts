import type { DelegatedEntry, DirectEntry, IdentifierType, StepUpConfig } from "./config.js";
import { PASSKEY_STEP } from "./rules.js";

/** What the user holds that entries are matched against. */
export interface Holdings {
  identifierTypes: ReadonlySet<IdentifierType>;
  /** Whether the user holds a passkey for the app: a `verify_passkey` entry matches only then. */
  passkey: boolean;
}

/** Whether a direct entry applies to a user holding `held`. */
export function matches(e: DirectEntry, held: Holdings): boolean {
  return (
    e.identifierTypes.some((t) => held.identifierTypes.has(t)) &&
    (held.passkey || !e.steps.some((s) => s.key === PASSKEY_STEP))
  );
}

export type Resolution =
  { kind: "direct"; entry: DirectEntry } | { kind: "delegated"; entry: DelegatedEntry } | { kind: "none" };

/**
 * Which entry answers a step-up request, by docs/session-api.md#step-up-request-rules: the
 * first direct entry, in declaration order, whose scope matches, whose identifier types overlap
 * those the user holds and, when a step is `verify_passkey`, whose user holds a passkey; else the
 * scope's delegated entry (at most one exists); else none.
 */
export function decide(config: StepUpConfig, scope: string, held: Holdings): Resolution {
  const direct = config.entries.find(
    (e): e is DirectEntry => e.mode === "direct" && e.scope === scope && matches(e, held),
  );
  if (direct !== undefined) return { kind: "direct", entry: direct };
  const delegated = config.entries.find(
    (e): e is DelegatedEntry => e.mode === "delegated" && e.scope === scope,
  );
  if (delegated !== undefined) return { kind: "delegated", entry: delegated };
  return { kind: "none" };
}
