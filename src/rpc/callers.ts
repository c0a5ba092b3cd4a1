/**
 * A kind of caller, made by the domain that authenticates it (an account by its API key, a user
 * by a session token, an app by its management key): the key its authenticator puts the caller
 * under on the call context, and the key its handlers read the caller back by. The transport
 * knows no domain: it carries `who` untyped and logs `identity(who)`.
 */
export interface CallerKey<T> {
  /** The kind's name, as src/rpc/surface.ts declares a method's caller. */
  readonly kind: string;
  /** The caller as logs and metrics name it (never a secret). */
  identity(who: T): string;
}

export function callerKey<T>(kind: string, identity: (who: T) => string): CallerKey<T> {
  return { kind, identity };
}

/** Who calls, under the key of its kind: what the binding puts on the call context. */
export interface Caller {
  readonly key: CallerKey<unknown>;
  readonly who: unknown;
}
