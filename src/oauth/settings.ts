import { z } from "zod";
import { defineSettings, setting } from "../settings/define.js";
import { httpUrl, window, WINDOW_RULE } from "../settings/rules.js";

/** The issuer, server tokens, DPoP and the token endpoint's failure windows. */
export const oauthSettings = defineSettings({
  ISSUER_URL: setting({
    schema: httpUrl().default("http://127.0.0.1:8080"),
    section: "service",
    default: "`http://127.0.0.1:8080` outside production",
    rule: "an http or https URL",
    text:
      "The public address clients reach: token issuer (`iss`) and base of the RFC 8414 metadata and " +
      "`jwks_uri`. Required when `NODE_ENV=production`: unset, the start stops with one line naming it.",
    // Tokens and the metadata must not name 127.0.0.1 there.
    requiredInProduction: "tokens, jwks_uri and the metadata name it",
  }),
  ACCESS_TOKEN_TTL_SECONDS: setting({
    schema: z.coerce.number().int().min(60).max(86_400).default(3_600),
    section: "tokens",
    text: "Lifetime of server (client-credentials) tokens.",
  }),
  DPOP_PROOF_MAX_AGE_SECONDS: setting({
    schema: z.coerce.number().int().min(5).max(600).default(60),
    section: "tokens",
    text:
      "How far a DPoP proof's `iat` may be from now, either way, at the token endpoint; its `jti` is " +
      "refused again for twice as long ([session-api.md](session-api.md#dpop)).",
  }),
  TOKEN_FAILURES_CLIENT: setting({
    schema: window.default({ limit: 10, windowSeconds: 300 }),
    section: "session",
    rule: WINDOW_RULE,
    text: "Failed client authentications of one `client_id` at the token, introspection and revocation endpoints.",
  }),
  TOKEN_FAILURES_IP: setting({
    schema: window.default({ limit: 30, windowSeconds: 300 }),
    section: "session",
    rule: WINDOW_RULE,
    text: "Failed client authentications from one client address at the token, introspection and revocation endpoints.",
  }),
});

/** OAuth's settings, parsed. */
export type OAuthSettings = ReturnType<(typeof oauthSettings)["finish"]>;
