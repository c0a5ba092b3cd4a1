import { z } from "zod";
import { badInput, RingfenceError } from "../errors.js";
import { noStore, type HandlerSet } from "../rpc/binding.js";
import { appOf } from "../apps/store.js";
import type { OAuthServiceService } from "../gen/ringfence/oauth/v1/oauth_service.js";
import { SCOPE } from "../apps/app.js";
import { httpUrlField } from "../net/validate.js";
import type { AppStore } from "../apps/store.js";
import type { AppEvents } from "../apps/webhooks.js";
import type { OutboundGuard } from "../net/outbound.js";
import { GRANT_TYPES, MAX_GRACE_SECONDS, type ClientStore } from "./clients.js";
import { clientCredentialsGrant, type TokenDeps } from "./grant.js";
import { introspect, revoke, type TokenLifecycleDeps } from "./introspection.js";
import { CLIENT_ASSERTION_ALGORITHMS, DPOP_ALGORITHMS, TOKEN_ENDPOINT_AUTH_METHODS } from "./metadata.js";
import { clientAuthMethod } from "./registration.js";

export interface OAuthDeps extends TokenDeps, TokenLifecycleDeps {
  apps: AppStore;
  /** Checks a `private_key_jwt` client's jwks_uri at registration. */
  outbound: Pick<OutboundGuard, "checkUrl" | "listed">;
  /**
   * App webhooks: `client.created`, `client.deleted` and `client.secret_rotated` (never with a
   * secret).
   */
  events?: AppEvents;
}

const Rotation = z.object({
  graceSeconds: z
    .number()
    .int("must be a whole number of seconds")
    .min(0, `must be 0 to ${MAX_GRACE_SECONDS}`)
    .max(MAX_GRACE_SECONDS, `must be 0 to ${MAX_GRACE_SECONDS}`)
    .optional(),
});

const httpUrl = httpUrlField({ required: true });

const NewClient = z.object({
  clientName: z.string().trim().min(1, "is required").max(200, "must be at most 200 characters"),
  providerUrl: httpUrl,
  redirectUris: z.array(httpUrl).max(20),
  scopes: z.array(SCOPE).max(100),
  grantTypes: z
    .array(z.string())
    .refine(
      (g) => g.length === GRANT_TYPES.length && GRANT_TYPES.every((t) => g.includes(t)),
      `must be exactly ["${GRANT_TYPES.join('", "')}"] for server tokens`,
    ),
});

/** What server tokens bring to their contract; its app operation (addAppScope) is src/apps/'s. */
export type OAuthMethod =
  | "createClient"
  | "deleteClient"
  | "createToken"
  | "getJwks"
  | "getAuthorizationServerMetadata"
  | "introspectToken"
  | "revokeToken"
  | "rotateClientSecret";

/** Server tokens: clients of an app, the token endpoint, the key set and the issuer metadata. */
export function oauthHandlers(
  deps: OAuthDeps & { clients: ClientStore },
): HandlerSet<typeof OAuthServiceService, OAuthMethod> {
  return {
    async createClient(req, ctx) {
      const app = appOf(ctx);
      const parsed = NewClient.safeParse(req);
      if (!parsed.success) throw badInput(parsed.error);
      const method = await clientAuthMethod(req, deps.outbound);
      const { client, secret } = await deps.clients.create({
        ...parsed.data,
        ...method,
        scopes: [...new Set(parsed.data.scopes)],
        appId: app.appId,
      });
      await deps.events?.emit(
        app.appId,
        "client.created",
        {
          client_id: client.clientId,
          client_name: client.clientName,
          scopes: client.scopes,
          grant_types: client.grantTypes,
        },
        { call: ctx },
      );
      // The answer holds the client's secret.
      noStore(ctx);
      return {
        clientId: client.clientId,
        clientSecret: secret ?? "",
        clientName: client.clientName,
        providerUrl: client.providerUrl,
        redirectUris: client.redirectUris,
        scopes: client.scopes,
        grantTypes: client.grantTypes,
        appId: client.appId,
        clientIdIssuedAt: client.issuedAt,
        // Registered without a method: RFC 7591's default, though the form is taken too.
        tokenEndpointAuthMethod: method.authMethod ?? "client_secret_basic",
        jwks: method.jwks as Record<string, unknown> | undefined,
        jwksUri: method.jwksUri,
      };
    },

    async deleteClient(req, ctx) {
      const app = appOf(ctx);
      if (!(await deps.clients.delete(app.appId, req.clientId))) {
        throw new RingfenceError("not_found", "this app has no such client");
      }
      await deps.events?.emit(app.appId, "client.deleted", { client_id: req.clientId }, { call: ctx });
      return {};
    },

    createToken(req, ctx) {
      const body = req.httpBody;
      return clientCredentialsGrant(
        deps,
        { contentType: body?.contentType ?? "", data: Buffer.from(body?.data ?? []) },
        ctx,
      );
    },

    async introspectToken(req, ctx) {
      const body = req.httpBody;
      return introspect(
        deps,
        { contentType: body?.contentType ?? "", data: Buffer.from(body?.data ?? []) },
        ctx,
      );
    },

    async revokeToken(req, ctx) {
      const body = req.httpBody;
      return revoke(deps, { contentType: body?.contentType ?? "", data: Buffer.from(body?.data ?? []) }, ctx);
    },

    async rotateClientSecret(req, ctx) {
      const app = appOf(ctx);
      const parsed = Rotation.safeParse({ graceSeconds: req.graceSeconds });
      if (!parsed.success) throw badInput(parsed.error);
      const graceSeconds = parsed.data.graceSeconds ?? 0;
      const secret = await deps.clients.rotateSecret(app.appId, req.clientId, graceSeconds);
      if (secret === undefined) throw new RingfenceError("not_found", "this app has no such client");
      await deps.events?.emit(
        app.appId,
        "client.secret_rotated",
        {
          client_id: req.clientId,
          grace_seconds: graceSeconds,
        },
        { call: ctx },
      );
      // The answer holds the client's new secret.
      noStore(ctx);
      return { clientId: req.clientId, clientSecret: secret };
    },

    async getJwks(_req, ctx) {
      ctx.setHeader("cache-control", "public, max-age=60");
      return deps.keys.jwks();
    },

    getAuthorizationServerMetadata(_req, ctx) {
      ctx.setHeader("cache-control", "public, max-age=300");
      return Promise.resolve({
        issuer: deps.issuer,
        tokenEndpoint: `${deps.issuer}/v1/session/oauth/token`,
        jwksUri: `${deps.issuer}/.well-known/jwks.json`,
        grantTypesSupported: [...GRANT_TYPES],
        tokenEndpointAuthMethodsSupported: [...TOKEN_ENDPOINT_AUTH_METHODS],
        responseTypesSupported: [],
        tokenEndpointAuthSigningAlgValuesSupported: [...CLIENT_ASSERTION_ALGORITHMS],
        dpopSigningAlgValuesSupported: [...DPOP_ALGORITHMS],
        introspectionEndpoint: `${deps.issuer}/v1/session/oauth/introspect`,
        revocationEndpoint: `${deps.issuer}/v1/session/oauth/revoke`,
        // The token endpoint's client authentication, the same function at all three.
        introspectionEndpointAuthMethodsSupported: [...TOKEN_ENDPOINT_AUTH_METHODS],
        revocationEndpointAuthMethodsSupported: [...TOKEN_ENDPOINT_AUTH_METHODS],
      });
    },
  };
}
