import { z } from "zod";

/** An application of the session service: it owns OAuth clients, scopes and step-up configuration. */
export interface App {
  appId: string;
  name: string;
  createdAt: string;
}

export interface StoredApp extends App {
  /** Keyed hash of the management API key; the key itself is shown once. */
  managementKeyHash: string;
}

/** RFC 6749 section 3.3 scope-token: printable ASCII except space, `"` and `\`. */
export const SCOPE = z
  .string()
  .min(1, "must not be empty")
  .max(128, "must be at most 128 characters")
  .regex(/^[\x21\x23-\x5B\x5D-\x7E]+$/, "must be printable ASCII without spaces, quotes or backslashes");

export const APP_ID = z.string().regex(/^app_[A-Za-z0-9_-]{16,64}$/, "is not an app id");

export const NewAppInput = z.object({ name: z.string().trim().min(1, "must not be empty").max(200) });
