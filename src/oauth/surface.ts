import { OAuthServiceService } from "../gen/ringfence/oauth/v1/oauth_service.js";
import { declareService, type JsonSchema } from "../rpc/surface.js";

/** The token endpoint's form (RFC 6749 section 4.4), which the proto carries as an HttpBody. */
const TOKEN_FORM: JsonSchema = {
  type: "object",
  required: ["grant_type"],
  properties: {
    grant_type: { type: "string", enum: ["client_credentials"] },
    scope: { type: "string", description: "Space-separated scopes registered for the client" },
    client_id: { type: "string", description: "With client_secret, instead of HTTP Basic" },
    client_secret: { type: "string" },
  },
};

/** The form of introspection (RFC 7662) and revocation (RFC 7009), carried as an HttpBody too. */
const TOKEN_QUERY_FORM: JsonSchema = {
  type: "object",
  required: ["token"],
  properties: {
    token: { type: "string", description: "The token asked about" },
    token_type_hint: { type: "string", description: "`access_token`; a hint only" },
    client_id: { type: "string", description: "With client_secret, instead of HTTP Basic" },
    client_secret: { type: "string" },
  },
};

/**
 * What oauth declares of its REST surface beyond the proto (src/rpc/surface.ts). The token
 * endpoint authenticates its client as part of the grant (RFC 6749 section 2.3, with its failure
 * windows), and introspection and revocation theirs the same way: they have no caller before
 * them, and answer RFC 6749 errors.
 */
export const OAUTH = declareService(OAuthServiceService, {
  dialect: "session",
  methodDialects: { createToken: "oauth", introspectToken: "oauth", revokeToken: "oauth" },
  successStatuses: { createClient: 201, deleteClient: 204 },
  callers: { createClient: "app", deleteClient: "app", addAppScope: "app", rotateClientSecret: "app" },
  forms: { createToken: TOKEN_FORM, introspectToken: TOKEN_QUERY_FORM, revokeToken: TOKEN_QUERY_FORM },
});
