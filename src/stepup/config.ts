import { z } from "zod";
import { SCOPE } from "../apps/app.js";
import { RingfenceError } from "../errors.js";
import type {
  AllowedScope,
  CreateStepUpConfigRequest,
  CreateStepUpConfigResponse,
} from "../gen/ringfence/stepup/v1/stepup_service.js";
import { GRANT_MODES, IDENTIFIER_TYPES, type IdentifierType } from "./needs.js";
import { STATUSES, checkDecision, isOneOf, type Decision } from "./rules.js";
import { isHttpUrl } from "../net/validate.js";

export type { Decision, Status, Step } from "./rules.js";
export type { GrantMode, IdentifierType } from "./needs.js";

/** An entry that serves its decision inline. */
export interface DirectEntry extends Decision {
  scope: string;
  mode: "direct";
  /** The user must hold at least one of these for the entry to match; not empty, no repeats. */
  identifierTypes: IdentifierType[];
}

/** An entry whose decision comes from the app's hook (see delegation.ts). */
export interface DelegatedEntry {
  scope: string;
  mode: "delegated";
  /** The hook, an http(s) URL. */
  url: string;
}

export type Entry = DirectEntry | DelegatedEntry;

/** An app's step-up configuration once validated: entries in declaration order. */
export interface StepUpConfig {
  /** The key set that signs delegated decisions; "" when every entry is direct. */
  jwksUrl: string;
  /** Kept and echoed as given (docs/session-api.md#step-up-configuration): no shape is set. */
  stepKeys: Record<string, unknown>[];
  entries: Entry[];
}

/** Bounds of our own (docs/session-api.md#step-up-configuration-limits): a configuration is small, and stored whole. */
export const MAX_ENTRIES = 50;
export const MAX_STEP_KEYS = 50;

/**
 * Checks every rule of docs/session-api.md#step-up-configuration and its limits and answers the
 * configuration to store. The first broken rule throws `invalid_stepup_config` whose `field` is
 * the path a caller wrote, e.g. `allowed_scopes[1].direct.identifier_types[0]`.
 * `appScopes` are the scopes registered for the app: an entry may only resolve one of them.
 */
export function validateStepUpConfig(
  req: CreateStepUpConfigRequest,
  appScopes: readonly string[],
): StepUpConfig {
  if (req.allowedScopes.length === 0) fail("allowed_scopes", "must not be empty");
  if (req.allowedScopes.length > MAX_ENTRIES) {
    fail("allowed_scopes", `must have at most ${MAX_ENTRIES} entries`);
  }
  const registered = new Set(appScopes);
  const pairs = new Set<string>();
  const delegatedScopes = new Set<string>();
  const entries = req.allowedScopes.map((raw, i): Entry => {
    const at = `allowed_scopes[${i}]`;
    const entry = validateEntry(raw, at, registered);
    if (entry.mode === "delegated") {
      // docs/session-api.md#step-up-configuration-limits: at most one delegated entry per scope, the fallback.
      if (delegatedScopes.has(entry.scope)) {
        fail(`${at}.scope`, `scope ${entry.scope} already has a delegated entry; at most one is allowed`);
      }
      delegatedScopes.add(entry.scope);
    } else {
      for (const [j, type] of entry.identifierTypes.entries()) {
        const pair = JSON.stringify([entry.scope, type]);
        if (pairs.has(pair)) {
          fail(
            `${at}.direct.identifier_types[${j}]`,
            `scope ${entry.scope} already has a direct entry for ${type}; (scope, identifier type) pairs must be unique`,
          );
        }
        pairs.add(pair);
      }
    }
    return entry;
  });

  if (req.jwksUrl === "") {
    if (delegatedScopes.size > 0) fail("jwks_url", "is required when an entry is delegated");
  } else if (!isHttpUrl(req.jwksUrl)) {
    fail("jwks_url", "must be an http or https URL");
  }

  if (req.stepKeys.length > MAX_STEP_KEYS) {
    fail("step_keys", `must have at most ${MAX_STEP_KEYS} elements`);
  }
  const stepKeys = req.stepKeys.map((value: unknown, i): Record<string, unknown> => {
    if (!isPlainObject(value)) fail(`step_keys[${i}]`, "must be an object");
    return { ...value };
  });

  return { jwksUrl: req.jwksUrl, stepKeys, entries };
}

function validateEntry(raw: AllowedScope, at: string, registered: ReadonlySet<string>): Entry {
  if (!SCOPE.safeParse(raw.scope).success) {
    fail(`${at}.scope`, "must be a scope token: printable ASCII without spaces, quotes or backslashes");
  }
  if (!registered.has(raw.scope)) {
    fail(`${at}.scope`, `scope ${raw.scope} is not registered for the app; add it at config/scopes first`);
  }
  if (raw.mode === "delegated") {
    if (raw.delegated === undefined) fail(`${at}.delegated`, "is required when mode is delegated");
    if (raw.direct !== undefined) fail(`${at}.direct`, "must be absent when mode is delegated");
    if (!isHttpUrl(raw.delegated.url)) fail(`${at}.delegated.url`, "must be an http or https URL");
    return { scope: raw.scope, mode: "delegated", url: raw.delegated.url };
  }
  if (raw.mode !== "direct") fail(`${at}.mode`, "must be direct or delegated");
  if (raw.direct === undefined) fail(`${at}.direct`, "is required when mode is direct");
  if (raw.delegated !== undefined) fail(`${at}.delegated`, "must be absent when mode is direct");

  const direct = raw.direct;
  const types = direct.identifierTypes;
  if (types.length === 0) fail(`${at}.direct.identifier_types`, "must not be empty");
  const identifierTypes: IdentifierType[] = [];
  for (const [j, type] of types.entries()) {
    if (!isOneOf(IDENTIFIER_TYPES, type)) {
      fail(`${at}.direct.identifier_types[${j}]`, `must be one of ${IDENTIFIER_TYPES.join(", ")}`);
    }
    if (identifierTypes.includes(type)) fail(`${at}.direct.identifier_types[${j}]`, `${type} appears twice`);
    identifierTypes.push(type);
  }

  const checked = checkDecision(direct, new Set(identifierTypes));
  if ("problem" in checked) fail(`${at}.direct.${checked.problem.field}`, checked.problem.message);
  return { scope: raw.scope, mode: "direct", identifierTypes, ...checked.decision };
}

/** A broken rule of the configuration: 400 invalid_stepup_config naming the field. */
export function fail(field: string, message: string): never {
  throw new RingfenceError("invalid_stepup_config", `${field} ${message}`, {}, { field });
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The stored configuration echoed in the generated response shape. */
export function toResponse(appId: string, config: StepUpConfig): CreateStepUpConfigResponse {
  return {
    appId,
    jwksUrl: config.jwksUrl,
    stepKeys: config.stepKeys.map((k) => ({ ...k })),
    allowedScopes: config.entries.map((e): AllowedScope => {
      if (e.mode === "delegated") {
        return { scope: e.scope, mode: e.mode, direct: undefined, delegated: { url: e.url } };
      }
      return {
        scope: e.scope,
        mode: e.mode,
        direct: {
          identifierTypes: [...e.identifierTypes],
          status: e.status,
          grantedFor: e.grantedFor,
          grantMode: e.grantMode,
          steps: e.steps.map((s) => ({ ...s })),
        },
        delegated: undefined,
      };
    }),
  };
}

const StoredStep = z.object({
  order: z.number().int(),
  key: z.string(),
  expirationDuration: z.number().int(),
});

const StoredEntry = z.discriminatedUnion("mode", [
  z.object({
    scope: z.string(),
    mode: z.literal("direct"),
    identifierTypes: z.array(z.enum(IDENTIFIER_TYPES)).min(1),
    status: z.enum(STATUSES),
    grantedFor: z.number().int(),
    grantMode: z.enum(GRANT_MODES),
    steps: z.array(StoredStep),
  }),
  z.object({ scope: z.string(), mode: z.literal("delegated"), url: z.string() }),
]);

/**
 * The shape a configuration is stored in (JSON of StepUpConfig), for reading it back from Redis:
 * data entering the process is parsed, even our own.
 */
export const StoredStepUpConfig: z.ZodType<StepUpConfig> = z.object({
  jwksUrl: z.string(),
  stepKeys: z.array(z.record(z.string(), z.unknown())),
  entries: z.array(StoredEntry),
});
