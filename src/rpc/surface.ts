/**
 * What the proto does not say about the REST surface, declared once: read by the bindings
 * (each domain's `module.ts`) and by the OpenAPI document (src/openapi/document.ts). Keys: the fully qualified
 * service, then the handler (the rpc's name in lowerCamelCase).
 */

/** Who calls a method: an account by its API key, a user by a session token, an app by its management key. */
export type CallerKind = "account" | "session" | "app";

/** The methods that have a caller, and its kind; the others are public. */
export const CALLERS = {
  "ringfence.verify.v1.VerifyService": {
    createAuthentication: "account",
    checkAuthentication: "account",
    retryAuthentication: "account",
    createFeedback: "account",
    getAuthentication: "account",
  },
  "ringfence.lookup.v1.LookupService": { lookupPhoneNumber: "account" },
  "ringfence.verify.v2.VerificationService": { createVerification: "account", checkVerification: "account" },
  "ringfence.lookup.v2.LookupService": { lookupPhoneNumber: "account" },
  "ringfence.verify.v2.FraudService": { listVerificationInsights: "account", listFraudDecisions: "account" },
  "ringfence.session.v1.SessionService": { logout: "session", getMe: "session", createAppWebhook: "app" },
  "ringfence.stepup.v1.StepUpService": {
    createStepUpConfig: "app",
    requestStepUp: "session",
    resetPassword: "session",
  },
  // The token endpoint authenticates its client as part of the grant (RFC 6749 section 2.3);
  // introspection and revocation authenticate theirs the same way.
  "ringfence.oauth.v1.OAuthService": {
    createClient: "app",
    deleteClient: "app",
    addAppScope: "app",
    rotateClientSecret: "app",
  },
} as const satisfies Record<string, Record<string, CallerKind>>;

/** HTTP statuses of success other than 200. */
export const SUCCESS_STATUSES = {
  "ringfence.session.v1.SessionService": { logout: 204, createAppWebhook: 201 },
  "ringfence.stepup.v1.StepUpService": { createStepUpConfig: 201, resetPassword: 204 },
  "ringfence.oauth.v1.OAuthService": { createClient: 201, deleteClient: 204 },
} as const satisfies Record<string, Record<string, 201 | 204>>;

/** A handler's name for an rpc's (`LookupPhoneNumber` → `lookupPhoneNumber`). */
export function handlerName(rpc: string): string {
  return rpc.charAt(0).toLowerCase() + rpc.slice(1);
}

/** What the surface declares for one service's method, by its rpc name. */
export function declared<T>(
  table: Record<string, Record<string, T>>,
  service: string,
  rpc: string,
): T | undefined {
  return table[service]?.[handlerName(rpc)];
}
