// Kept apart from validate.ts (which reads phone numbers, and so their metadata): the
// configuration checks its URLs with this alone.

export const NOT_HTTP_URL = "must be an http or https URL";

/** `value` as an http or https URL with a host, or undefined when it is not one. */
export function parseHttpUrl(value: string | URL): URL | undefined {
  const url = typeof value === "string" ? (URL.canParse(value) ? new URL(value) : undefined) : value;
  if (url === undefined) return undefined;
  return (url.protocol === "http:" || url.protocol === "https:") && url.hostname !== "" ? url : undefined;
}
