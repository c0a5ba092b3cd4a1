import { Algorithm, hash } from "@node-rs/argon2";

/** Passwords (docs/session-api.md#password-change): 8 to 128 characters, stored as argon2id. */
export const PASSWORD_LENGTH = { min: 8, max: 128 } as const;

/** Why a password is refused, or undefined. Length counts characters, not UTF-16 units. */
export function checkPasswordPolicy(password: string): string | undefined {
  const length = Array.from(password).length;
  if (length < PASSWORD_LENGTH.min) return `must be at least ${PASSWORD_LENGTH.min} characters`;
  if (length > PASSWORD_LENGTH.max) return `must be at most ${PASSWORD_LENGTH.max} characters`;
  return undefined;
}

/** argon2id with the library's defaults (OWASP's minimum: m=19 MiB, t=2, p=1). */
export function hashPassword(password: string): Promise<string> {
  return hash(password.normalize("NFKC"), { algorithm: Algorithm.Argon2id });
}
