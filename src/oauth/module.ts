import type { AppsModule } from "../apps/module.js";
import { OAuthServiceService } from "../gen/ringfence/oauth/v1/oauth_service.js";
import type { Module } from "../lifecycle/module.js";
import type { Registry } from "../registry.js";
import { bindService, handlersOf } from "../rpc/binding.js";
import { CALLERS, SUCCESS_STATUSES } from "../rpc/surface.js";
import { TokenFailures } from "./failures.js";
import { CachedKeySet } from "./keys/key-set.js";
import { oauthHandlers } from "./service.js";

export interface OAuthModule extends Module {
  /** The published keys, cached, to verify the tokens this service signs. */
  keySet: CachedKeySet;
}

/**
 * Server tokens: OAuth clients, the token endpoint and the signing keys. The first key exists
 * before the first token (a wrong SECRETS_KEY fails at start, not per call); every process
 * installs it, since the script that does keeps a key another got there first with.
 */
export function oauthModule(r: Registry, apps: AppsModule): OAuthModule {
  const handlers = oauthHandlers({
    apps: r.apps,
    clients: r.clients,
    failures: new TokenFailures(r.redis, r.keys, {
      perClient: r.config.TOKEN_FAILURES_CLIENT,
      perAddress: r.config.TOKEN_FAILURES_IP,
    }),
    keys: r.signingKeys,
    issuer: r.config.ISSUER_URL,
    lifetimeSeconds: r.config.ACCESS_TOKEN_TTL_SECONDS,
    events: apps.events,
  });
  return {
    name: "oauth",
    keySet: new CachedKeySet(r.signingKeys),
    bindings: [
      bindService(OAuthServiceService, handlersOf(OAuthServiceService, handlers, apps.handlers.oauth), {
        dialect: "session",
        methodDialects: { createToken: "oauth" },
        successStatuses: SUCCESS_STATUSES["ringfence.oauth.v1.OAuthService"],
        // The token endpoint authenticates its client as part of the grant (RFC 6749 section
        // 2.3, with its failure windows): createToken has no caller before it.
        callers: CALLERS["ringfence.oauth.v1.OAuthService"],
        authenticators: { app: apps.authenticate },
      }),
    ],
    prepare: async () => {
      await r.signingKeys.current();
    },
    watched: [r.signingKeys],
  };
}
