/**
 * What the RFC 8414 metadata says of client authentication and DPoP, shared by every endpoint
 * that authenticates a client the token endpoint's way (token, introspection, revocation).
 */

/** The ways a client may authenticate (RFC 7591 section 2); a client uses the one it registered. */
export const TOKEN_ENDPOINT_AUTH_METHODS = [
  "client_secret_basic",
  "client_secret_post",
  "private_key_jwt",
] as const;

export type TokenEndpointAuthMethod = (typeof TOKEN_ENDPOINT_AUTH_METHODS)[number];

/** The algorithms a `private_key_jwt` client assertion may be signed with: asymmetric only. */
export const CLIENT_ASSERTION_ALGORITHMS = ["ES256", "RS256", "PS256"] as const;

/** The algorithms a DPoP proof may be signed with (RFC 9449 section 5.1): asymmetric only. */
export const DPOP_ALGORITHMS = ["ES256", "RS256", "PS256"] as const;

/** `client_assertion_type` of a JWT client assertion (RFC 7523 section 2.2). */
export const JWT_BEARER_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
