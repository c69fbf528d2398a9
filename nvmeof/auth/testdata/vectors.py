#!/usr/bin/env python3
"""Known-answer vectors for DH-HMAC-CHAP, computed independently of the Go
code with Python's hmac/hashlib and the RFC 7919 primes printed by OpenSSL.
Run once: python3 testdata/vectors.py > testdata/vectors.json
Formulas (NVMe base spec 2.0 8.13.5; reference/auth-tls.md):
  K' = HMAC_H(K, NQN || "NVMe-over-Fabrics")
  Ca = C (null group) or HMAC_H(H(Z), C), Z = g^xy mod p, big-endian, padded to len(p)
  R1 = HMAC_H(Kh', Ca1 || LE32(S1) || LE16(TID) || 00 || "HostHost" || NQNh || 00 || NQNc)
  R2 = HMAC_H(Kc', Ca2 || LE32(S2) || LE16(TID) || 00 || "Controller" || NQNc || 00 || NQNh)
"""
import base64, hashlib, hmac, json, re, struct, subprocess, zlib

HASHES = {1: hashlib.sha256, 2: hashlib.sha384, 3: hashlib.sha512}
HOST = "nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-4908-8706-050403020100"
SUB = "nqn.2026-01.io.nvstripe:kat"
S1, S2, TID = 0x01020304, 0x0A0B0C0D, 0x0102

def prime(bits):
    pem = subprocess.check_output(["openssl", "genpkey", "-genparam", "-algorithm", "DH", "-pkeyopt", "group:ffdhe%d" % bits])
    out = subprocess.check_output(["openssl", "asn1parse"], input=pem).decode()
    return int(re.findall(r"INTEGER\s+:([0-9A-F]+)", out)[0], 16)

def secret(h, key):
    return "DHHC-1:%02x:%s:" % (h, base64.b64encode(key + struct.pack("<I", zlib.crc32(key))).decode())

def transform(h, key, nqn):
    return hmac.new(key, nqn.encode() + b"NVMe-over-Fabrics", HASHES[h]).digest()

def augment(h, c, z):
    if z is None:
        return c
    return hmac.new(HASHES[h](z).digest(), c, HASHES[h]).digest()

def resp(h, key, ca, seq, role, n1, n2):
    msg = ca + struct.pack("<IH", seq, TID) + b"\x00" + role + n1.encode() + b"\x00" + n2.encode()
    return hmac.new(key, msg, HASHES[h]).digest()

vectors = []
groups = [(0, None)] + [(i + 1, b) for i, b in enumerate([2048, 3072, 4096, 6144, 8192])]
for h in (1, 2, 3):
    hl = HASHES[h]().digest_size
    hkey = bytes((i * 3 + h) & 0xFF for i in range(hl))
    ckey = bytes((255 - i * 5) & 0xFF for i in range(hl))
    c1 = bytes((i * 7 + 1) & 0xFF for i in range(hl))
    c2 = bytes((i * 11 + 2) & 0xFF for i in range(hl))
    for gid, bits in groups:
        v = {"hash": h, "dhgroup": gid, "host_nqn": HOST, "sub_nqn": SUB, "tid": TID, "s1": S1, "s2": S2,
             "host_secret": secret(h, hkey), "ctrl_secret": secret(h, ckey),
             "host_key_transformed": transform(h, hkey, HOST).hex(), "ctrl_key_transformed": transform(h, ckey, SUB).hex(),
             "c1": c1.hex(), "c2": c2.hex()}
        z = None
        if bits:
            p = prime(bits)
            plen = (p.bit_length() + 7) // 8
            xh = bytes((i * 13 + 5) & 0xFF for i in range(64))  # host private exponent, 64 bytes
            xc = bytes((i * 17 + 9) & 0xFF for i in range(64))  # controller private exponent
            a, b = int.from_bytes(xh, "big"), int.from_bytes(xc, "big")
            z = pow(pow(2, b, p), a, p).to_bytes(plen, "big")
            v.update({"host_private": xh.hex(), "ctrl_private": xc.hex(),
                      "host_public": pow(2, a, p).to_bytes(plen, "big").hex(),
                      "ctrl_public": pow(2, b, p).to_bytes(plen, "big").hex(), "shared": z.hex()})
        kh, kc = transform(h, hkey, HOST), transform(h, ckey, SUB)
        v["r1"] = resp(h, kh, augment(h, c1, z), S1, b"HostHost", HOST, SUB).hex()
        v["r2"] = resp(h, kc, augment(h, c2, z), S2, b"Controller", SUB, HOST).hex()
        vectors.append(v)
print(json.dumps(vectors, indent=1))
