import { expect } from "chai";
import { sourceNetwork } from "../../src/net/cidr.js";

describe("client address networks", () => {
  it("remembers a login's source by its IPv4 /24 and its IPv6 /64, whatever the spelling", () => {
    expect(sourceNetwork("203.0.113.77")).to.equal("203.0.113.0/24");
    expect(sourceNetwork("::ffff:203.0.113.9")).to.equal("203.0.113.0/24");
    expect(sourceNetwork("2001:db8:1:2:3:4:5:6")).to.equal("2001:db8:1:2::/64");
    expect(sourceNetwork("2001:DB8:1:2::9")).to.equal("2001:db8:1:2::/64");
    expect(sourceNetwork("203.0.114.77")).to.not.equal(sourceNetwork("203.0.113.77"));
  });
});
