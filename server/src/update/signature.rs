//! Release signatures (`--update-public-key`): a release installs only if a minisign
//! signature of its `.crate` file verifies with the configured key.
//!
//! What is signed is the `.crate` file exactly as the registry serves it: the file whose
//! SHA-256 the index lists as `versions[].checksum`, the one `cargo install --locked
//! --version X` downloads and checks against that same checksum. The updater downloads it,
//! checks its SHA-256 against the index, and verifies the signature over its bytes, so what
//! cargo installs is the file that was verified (a registry never serves other bytes for a
//! published version: versions are immutable).
//!
//! Where the signature lives: crates.io cannot host an extra file beside a version, and no
//! field of its metadata is writable by a publisher, so the signature is a release asset of
//! roost's own repository, at a URL derived from the compiled-in repository (not from
//! anything the index says): [`DEFAULT_SIGNATURE_URL`]. A squatter on the package name can
//! neither upload there nor sign with the key. `--update-signature-url` moves it (for a
//! mirror, or tests).

use sha2::{Digest, Sha256};

/// The project's release key, the default of `--update-public-key`. None until releases
/// are signed: until then only the repository check stands (docs/operations.md, "Self-update").
pub const DEFAULT_PUBLIC_KEY: Option<&str> = None;

/// Where a release's signature is published: `{package}` and `{version}` are filled in.
pub const DEFAULT_SIGNATURE_URL: &str =
    concat!(env!("CARGO_PKG_REPOSITORY"), "/releases/download/v{version}/{package}-{version}.crate.minisig");

/// A minisign public key as given to `--update-public-key`: the base64 line (what `minisign
/// -G` prints and the second line of `minisign.pub`), or the whole `minisign.pub` text.
/// `Ok` with the base64 line.
pub fn parse_public_key(text: &str) -> Result<String, String> {
    let line = text.lines().map(str::trim).rfind(|l| !l.is_empty() && !l.starts_with("untrusted comment:"));
    let line = line.unwrap_or_default();
    minisign_verify::PublicKey::from_base64(line)
        .map(|_| line.to_owned())
        .map_err(|e| format!("not a minisign public key ({e}): give the base64 line of minisign.pub, like RWQ…"))
}

/// The signature URL of `package` at `version` from the template.
pub fn signature_url(template: &str, package: &str, version: &str) -> String {
    template.replace("{package}", package).replace("{version}", version)
}

/// The SHA-256 of `bytes`, in lowercase hex (as crates.io lists `checksum`).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Verifies `signature` (a `.minisig` file's text) over `crate_bytes` with `public_key`
/// (base64). Only prehashed signatures, what `minisign -S` makes since 0.8, are accepted.
pub fn verify(public_key: &str, crate_bytes: &[u8], signature: &str) -> Result<(), String> {
    let key = minisign_verify::PublicKey::from_base64(public_key).map_err(|e| format!("the public key: {e}"))?;
    let signature =
        minisign_verify::Signature::decode(signature).map_err(|e| format!("not a minisign signature ({e})"))?;
    key.verify(crate_bytes, &signature, false).map_err(|err| match err {
        minisign_verify::Error::UnexpectedKeyId => "it is signed with another key than --update-public-key".to_owned(),
        minisign_verify::Error::InvalidSignature => "the signature does not match the file".to_owned(),
        other => format!("the signature does not verify ({other})"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keypair() -> (minisign::KeyPair, String) {
        let pair = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
        let public = pair.pk.to_base64();
        (pair, public)
    }

    fn sign(pair: &minisign::KeyPair, bytes: &[u8]) -> String {
        minisign::sign(Some(&pair.pk), &pair.sk, bytes, Some("roost-server 0.3.0"), None).unwrap().to_string()
    }

    #[test]
    fn a_signature_verifies_only_with_its_key_and_its_file() {
        let (pair, public) = keypair();
        let (_, other_public) = keypair();
        let file = b"roost-server-0.3.0.crate";
        let signature = sign(&pair, file);
        assert_eq!(verify(&public, file, &signature), Ok(()));
        assert!(verify(&other_public, file, &signature).unwrap_err().contains("another key"));
        assert!(verify(&public, b"another file", &signature).unwrap_err().contains("does not match"));
        assert!(verify(&public, file, "<html>Not Found</html>").unwrap_err().contains("not a minisign signature"));
    }

    #[test]
    fn public_keys_are_read_from_the_line_or_the_file() {
        let (pair, public) = keypair();
        assert_eq!(parse_public_key(&public), Ok(public.clone()));
        assert_eq!(parse_public_key(&format!("  {public}\n")), Ok(public.clone()));
        let file = pair.pk.to_box().unwrap().to_string();
        assert!(file.starts_with("untrusted comment:"), "{file}");
        assert_eq!(parse_public_key(&file), Ok(public));
        assert!(parse_public_key("RWQnope").is_err());
        assert!(parse_public_key("").is_err());
    }

    #[test]
    fn the_default_signature_url_is_a_release_asset_of_roosts_repository() {
        assert_eq!(
            signature_url(DEFAULT_SIGNATURE_URL, "roost-server", "0.3.0"),
            "https://github.com/roost-dev/roost/releases/download/v0.3.0/roost-server-0.3.0.crate.minisig"
        );
        assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}
