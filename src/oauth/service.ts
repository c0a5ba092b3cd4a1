import { z } from "zod";
import { badField, badInput, RingfenceError } from "../errors.js";
import type { Handlers } from "../rpc/binding.js";
import type { OAuthServiceService } from "../gen/ringfence/oauth/v1/oauth_service.js";
import { HTTP_STATUS_MARKER } from "../rpc/binding.js";
import { SCOPE } from "../apps/app.js";
import type { AppStore } from "../apps/store.js";
import type { AppEvents } from "../apps/webhooks.js";
import { GRANT_TYPES, type ClientStore } from "./clients.js";
import { clientCredentialsGrant, type TokenDeps } from "./client_credentials.js";

export interface OAuthDeps extends TokenDeps {
  apps: AppStore;
  /** App webhooks: `client.created` and `client.deleted` (never with a secret). */
  events?: AppEvents;
}

const httpUrl = z
  .string()
  .min(1, "is required")
  .max(2048)
  .refine((v) => {
    try {
      return ["http:", "https:"].includes(new URL(v).protocol);
    } catch {
      return false;
    }
  }, "must be an http or https URL");

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

/** Server tokens: clients of an app, the token endpoint, the key set and the issuer metadata. */
export function oauthHandlers(
  deps: OAuthDeps & { clients: ClientStore },
): Handlers<typeof OAuthServiceService> {
  return {
    async createClient(req, ctx) {
      const app = await deps.apps.authenticate(req.appId, ctx);
      const parsed = NewClient.safeParse(req);
      if (!parsed.success) throw badInput(parsed.error);
      const { client, secret } = await deps.clients.create({
        ...parsed.data,
        scopes: [...new Set(parsed.data.scopes)],
        appId: app.appId,
      });
      await deps.events?.emit(app.appId, "client.created", {
        client_id: client.clientId,
        client_name: client.clientName,
        scopes: client.scopes,
        grant_types: client.grantTypes,
      });
      ctx.setHeader(HTTP_STATUS_MARKER, "201");
      ctx.setHeader("cache-control", "no-store");
      return {
        clientId: client.clientId,
        clientSecret: secret,
        clientName: client.clientName,
        providerUrl: client.providerUrl,
        redirectUris: client.redirectUris,
        scopes: client.scopes,
        grantTypes: client.grantTypes,
        appId: client.appId,
        clientIdIssuedAt: client.issuedAt,
      };
    },

    async deleteClient(req, ctx) {
      const app = await deps.apps.authenticate(req.appId, ctx);
      if (!(await deps.clients.delete(app.appId, req.clientId))) {
        throw new RingfenceError("not_found", "this app has no such client");
      }
      await deps.events?.emit(app.appId, "client.deleted", { client_id: req.clientId });
      ctx.setHeader(HTTP_STATUS_MARKER, "204");
      return {};
    },

    async addAppScope(req, ctx) {
      const app = await deps.apps.authenticate(req.appId, ctx);
      const scope = SCOPE.safeParse(req.scope);
      if (!scope.success) {
        throw badField("scope", scope.error.issues[0]?.message ?? "is invalid");
      }
      return { appId: app.appId, scopes: await deps.apps.addScope(app.appId, scope.data) };
    },

    async createToken(req, ctx) {
      const body = req.httpBody;
      return clientCredentialsGrant(
        deps,
        { contentType: body?.contentType ?? "", data: Buffer.from(body?.data ?? []) },
        ctx,
      );
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
        tokenEndpointAuthMethodsSupported: ["client_secret_basic", "client_secret_post"],
        responseTypesSupported: [],
      });
    },
  };
}
