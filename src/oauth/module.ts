import type { AppsModule } from "../apps/module.js";
import type { Module, SharedParts } from "../lifecycle/module.js";
import { bindService, handlersOf } from "../rpc/binding.js";
import { ClientAssertions } from "./client-assertion.js";
import { ClientKeySets } from "./client-keys.js";
import { DpopProofs } from "./dpop.js";
import { TokenFailures } from "./failures.js";
import { CachedKeySet } from "./keys/key-set.js";
import type { ClientStore } from "./clients.js";
import type { RedisSigningKeys } from "./keys/signing-keys.js";
import { oauthHandlers, type OAuthDeps } from "./service.js";
import type { OAuthSettings } from "./settings.js";
import { OAUTH } from "./surface.js";

export interface OAuthModule extends Module {
  /** The published keys, cached, to verify the tokens this service signs. */
  keySet: CachedKeySet;
  /** The token issuer (`iss`, ISSUER_URL), for the tokens other modules check. */
  issuer: string;
}

/**
 * Server tokens: OAuth clients, the token endpoint and the signing keys. The first key exists
 * before the first token (a wrong SECRETS_KEY fails at start, not per call); every process
 * installs it, since the script that does keeps a key another got there first with.
 */
/** What the OAuth module takes of the process (src/registry.ts gives it). */
export interface OAuthNeeds extends Pick<SharedParts, "redis" | "keys" | "outbound"> {
  config: OAuthSettings;
  apps: OAuthDeps["apps"];
  clients: ClientStore;
  signingKeys: RedisSigningKeys;
  /** User sessions, whose access tokens introspection answers for. */
  sessions: OAuthDeps["sessions"];
}

export function oauthModule(r: OAuthNeeds, apps: AppsModule): OAuthModule {
  const keySet = new CachedKeySet(r.signingKeys);
  const handlers = oauthHandlers({
    apps: r.apps,
    clients: r.clients,
    failures: new TokenFailures(r.redis, r.keys, {
      perClient: r.config.TOKEN_FAILURES_CLIENT,
      perAddress: r.config.TOKEN_FAILURES_IP,
    }),
    ...proofChecks(r),
    outbound: r.outbound,
    keys: r.signingKeys,
    issuer: r.config.ISSUER_URL,
    lifetimeSeconds: r.config.ACCESS_TOKEN_TTL_SECONDS,
    events: apps.events,
    keySet,
    sessions: r.sessions,
  });
  return {
    name: "oauth",
    issuer: r.config.ISSUER_URL,
    keySet,
    bindings: [
      bindService(OAUTH.definition, handlersOf(OAUTH.definition, handlers, apps.handlers.oauth), {
        ...OAUTH.surface,
        authenticators: { app: apps.authenticate },
      }),
    ],
    prepare: async () => {
      await r.signingKeys.current();
    },
    watched: [r.signingKeys],
  };
}

/**
 * What client authentication and the token endpoint check beyond secrets: `private_key_jwt`
 * client assertions (their keys fetched through the outbound guard) and DPoP proofs.
 */
export function proofChecks(r: Omit<OAuthNeeds, "apps" | "clients" | "signingKeys" | "sessions">): {
  assertions: ClientAssertions;
  dpop: DpopProofs;
} {
  const issuer = r.config.ISSUER_URL;
  const tokenEndpoint = `${issuer}/v1/session/oauth/token`;
  return {
    assertions: new ClientAssertions({
      redis: r.redis,
      keys: r.keys,
      keySets: new ClientKeySets({ fetch: r.outbound.fetch }),
      issuer,
      tokenEndpoint,
    }),
    dpop: new DpopProofs({
      redis: r.redis,
      keys: r.keys,
      htu: tokenEndpoint,
      maxAgeSeconds: r.config.DPOP_PROOF_MAX_AGE_SECONDS,
    }),
  };
}
