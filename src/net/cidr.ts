import { BlockList, isIP } from "node:net";

/** A parsed CIDR, as configured (`10.0.0.0/8`, `::1/128`). */
export interface Cidr {
  address: string;
  prefix: number;
  family: "ipv4" | "ipv6";
}

/** `a/n,b/m` → CIDRs; throws on a malformed entry. Blank entries are skipped. */
export function parseCidrs(list: string): Cidr[] {
  return list
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")
    .map((entry) => {
      const slash = entry.lastIndexOf("/");
      const address = slash < 0 ? entry : entry.slice(0, slash);
      const version = isIP(address);
      if (version === 0) throw new Error(`not an IP address: ${entry}`);
      const max = version === 4 ? 32 : 128;
      const raw = slash < 0 ? String(max) : entry.slice(slash + 1);
      const prefix = Number(raw);
      if (!/^\d{1,3}$/.test(raw) || prefix > max) {
        throw new Error(`bad prefix length: ${entry}`);
      }
      return { address, prefix, family: version === 4 ? "ipv4" : "ipv6" };
    });
}

/** A set of CIDRs to test addresses against (IPv4-mapped IPv6 addresses count as IPv4). */
export function blockList(cidrs: readonly Cidr[]): BlockList {
  const list = new BlockList();
  for (const c of cidrs) list.addSubnet(c.address, c.prefix, c.family);
  return list;
}

/** `::ffff:1.2.3.4` → `1.2.3.4`; other addresses as given (zone ids dropped). */
export function normalizeAddress(address: string): string {
  const bare = address.replace(/^\[|\]$/g, "").replace(/%.*$/, "");
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(bare);
  return mapped?.[1] ?? bare;
}

/** Whether `address` (any spelling `normalizeAddress` reads) is inside the list. */
export function contains(list: BlockList, address: string): boolean {
  const a = normalizeAddress(address);
  const version = isIP(a);
  if (version === 0) return false;
  return list.check(a, version === 4 ? "ipv4" : "ipv6");
}

/**
 * The client of a call that came through `peer`: the rightmost `x-forwarded-for` entry when the
 * peer is a trusted proxy (Envoy appends the address it saw), else the peer itself.
 */
export function clientOf(peer: string | undefined, forwardedFor: string | undefined, trusted: BlockList) {
  if (peer === undefined) return undefined;
  if (forwardedFor === undefined || !contains(trusted, peer)) return normalizeAddress(peer);
  const last = forwardedFor.split(",").pop()?.trim() ?? "";
  return isIP(normalizeAddress(last)) === 0 ? normalizeAddress(peer) : normalizeAddress(last);
}

/** The address of a `host:port` peer string as grpc-js gives it (`::1:5000`, `1.2.3.4:5000`). */
export function peerAddress(peer: string): string {
  const bracketed = /^\[([^\]]+)\]:\d+$/.exec(peer);
  if (bracketed?.[1] !== undefined) return bracketed[1];
  const i = peer.lastIndexOf(":");
  const host = i < 0 ? peer : peer.slice(0, i);
  return isIP(normalizeAddress(host)) === 0 ? peer : host;
}

/**
 * The part of a client address that rate limits count: an IPv4 address whole, an IPv6 address by
 * its /64, since one host commonly holds a whole /64 and could rotate through it.
 */
export function limitSubject(address: string): string {
  const a = normalizeAddress(address);
  if (isIP(a) !== 6) return a;
  const full = expandIpv6(a);
  return `${full.slice(0, 4).join(":")}::/64`;
}

/**
 * The network a login is remembered from as a known source (docs/session-api.md#abuse-limits):
 * an IPv4 address by its /24, an IPv6 address by its /64, since a home's or an office's address
 * moves within its network.
 */
export function sourceNetwork(address: string): string {
  const a = normalizeAddress(address);
  if (isIP(a) !== 4) return limitSubject(a);
  return `${a.split(".").slice(0, 3).join(".")}.0/24`;
}

/** The eight 16-bit groups of an IPv6 address, in lower-case hex. */
function expandIpv6(a: string): string[] {
  const [head = "", tail] = a.toLowerCase().split("::");
  const left = head === "" ? [] : head.split(":");
  const right = tail === undefined || tail === "" ? [] : tail.split(":");
  // An embedded IPv4 tail (::ffff:1.2.3.4 was normalised away; others keep their first groups).
  const groups =
    tail === undefined
      ? left
      : [...left, ...Array<string>(8 - left.length - right.length).fill("0"), ...right];
  return groups.map((g) => (g.includes(".") ? g : parseInt(g, 16).toString(16)));
}
