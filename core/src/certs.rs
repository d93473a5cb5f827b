//! The fleet's certificates: a fleet CA, leaf certificates it signs for each role (agent,
//! operator, coordinator), and [`peer_identity`], which verifies a peer's certificate against
//! the CA and reads back its role and name, for the coordinator's TLS layer. The role travels
//! as a SAN URI `abfleet://role/ROLE/NAME` (the subject's OU and CN say the same for people
//! reading `openssl x509 -text`; only the URI counts). Pure: PEM text in, PEM text out; the
//! CLI writes the files.

use std::fmt;
use std::str::FromStr;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, UnixTime};
use sha2::Digest as _;

/// The SAN URI prefix that carries a certificate's role and name.
pub const ROLE_URI_PREFIX: &str = "abfleet://role/";
/// How long the fleet CA is valid.
pub const CA_VALIDITY_DAYS: i64 = 3650;
/// How long a leaf certificate is valid; rotate before then (docs/security.md).
pub const LEAF_VALIDITY_DAYS: i64 = 365;

/// What a certificate lets its holder be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// A bench host's agent (a TLS client of the coordinator).
    Agent,
    /// A person or CI job submitting and reading runs (a TLS client).
    Operator,
    /// The coordinator (the TLS server).
    Coordinator,
    /// A person or dashboard that reads the web view and nothing else (a TLS client).
    Viewer,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Agent, Role::Operator, Role::Coordinator, Role::Viewer];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Operator => "operator",
            Role::Coordinator => "coordinator",
            Role::Viewer => "viewer",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = CertError;
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == value)
            .ok_or_else(|| CertError::UnknownRole(value.to_string()))
    }
}

/// An extended key usage a role's certificate must carry.
#[derive(Debug, Clone, Copy)]
pub struct KeyUsageOid {
    /// Its name, as `openssl x509 -text` shows it.
    pub name: &'static str,
    /// The OID's DER content bytes.
    pub oid: &'static [u8],
}

/// id-kp-serverAuth, 1.3.6.1.5.5.7.3.1.
const SERVER_AUTH: KeyUsageOid = KeyUsageOid {
    name: "serverAuth",
    oid: &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01],
};
/// id-kp-clientAuth, 1.3.6.1.5.5.7.3.2.
const CLIENT_AUTH: KeyUsageOid = KeyUsageOid {
    name: "clientAuth",
    oid: &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02],
};

impl Role {
    /// The extended key usage a certificate of this role must carry: serverAuth for the
    /// coordinator, clientAuth for the others. A certificate without it is refused.
    pub fn required_key_usage(self) -> KeyUsageOid {
        match self {
            Role::Coordinator => SERVER_AUTH,
            Role::Agent | Role::Operator | Role::Viewer => CLIENT_AUTH,
        }
    }
}

/// Who a verified peer certificate says its holder is, and which certificate said it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerIdentity {
    pub role: Role,
    pub name: String,
    pub certificate: CertificateId,
}

/// What tells one certificate from another of the same role and name (a re-issue with
/// `--force` keeps the name and changes both): what a revocation names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CertificateId {
    /// The serial number, lowercase hex without separators (as `openssl x509 -serial`
    /// prints it, lowercased).
    pub serial: String,
    /// The SHA-256 of the certificate's DER, lowercase hex (`openssl x509 -fingerprint
    /// -sha256`, without colons, lowercased).
    pub fingerprint: String,
}

impl CertificateId {
    /// Whether `text` names this certificate: its serial or its fingerprint, in any case
    /// and with or without `:` separators.
    pub fn is_named_by(&self, text: &str) -> bool {
        let wanted = normalize_hex(text);
        // Both sides without leading zeros: a fingerprint may start with one (1 in 16), and
        // a serial is typed with or without openssl's leading `00`.
        !wanted.is_empty()
            && (wanted == normalize_hex(&self.serial) || wanted == normalize_hex(&self.fingerprint))
    }
}

/// A serial or fingerprint as typed (`AB:CD:…`, `0xabcd…`, `abcd…`) in the form
/// [`CertificateId`] keeps; empty when `text` is not hex.
pub fn normalize_hex(text: &str) -> String {
    let text = text.trim();
    let text = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    let hex: String = text
        .chars()
        .filter(|c| *c != ':')
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if hex.chars().all(|c| c.is_ascii_hexdigit()) {
        hex.trim_start_matches('0').to_string()
    } else {
        String::new()
    }
}

/// A certificate as `abfleet certs show` and `certs revoke --cert` read it, unverified.
#[derive(Debug, Clone)]
pub struct CertificateFacts {
    pub identity: PeerIdentity,
    /// The end of its validity, Unix seconds.
    pub not_after_s: i64,
}

/// The role, name, serial, fingerprint and expiry of the first certificate in `pem`,
/// without checking who signed it.
pub fn certificate_facts(pem: &str) -> Result<CertificateFacts, CertError> {
    let der = der_from_pem("certificate", pem)?;
    let identity = read_role(&der)?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).map_err(|err| CertError::Parse {
        what: "certificate",
        message: err.to_string(),
    })?;
    Ok(CertificateFacts {
        identity,
        not_after_s: cert.validity().not_after.timestamp(),
    })
}

/// A certificate and its private key, both PEM.
#[derive(Clone)]
pub struct IssuedCert {
    pub cert_pem: String,
    pub key_pem: String,
}

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("`{0}` is not a role; use agent, operator or coordinator")]
    UnknownRole(String),
    #[error(
        "`{0}` is not a certificate name; use letters, digits and `._-` (a host name, a person)"
    )]
    BadName(String),
    #[error("`{0}` is not a DNS name or IP address for the coordinator's certificate")]
    BadSan(String),
    #[error("failed to read the {what}: {message}")]
    Parse { what: &'static str, message: String },
    #[error("failed to make the certificate: {0}")]
    Generate(String),
    #[error("the certificate is not signed by the fleet CA or is not valid now ({0}); issue one with `abfleet certs issue`")]
    Untrusted(String),
    #[error("the certificate of role `{role}` lacks the extended key usage {usage} its role needs; issue one with `abfleet certs issue`")]
    MissingKeyUsage { role: Role, usage: &'static str },
    #[error("the certificate carries no abfleet role (a SAN URI `abfleet://role/ROLE/NAME`); issue one with `abfleet certs issue`")]
    NoRole,
    #[error("the certificate carries {0} abfleet roles; a certificate must carry exactly one")]
    ManyRoles(usize),
}

fn generate_error(err: rcgen::Error) -> CertError {
    CertError::Generate(err.to_string())
}

/// A new self-signed fleet CA (key usage certSign and cRLSign, no intermediates below it).
pub fn new_ca(common_name: &str) -> Result<IssuedCert, CertError> {
    let key = KeyPair::generate().map_err(generate_error)?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn.push(DnType::OrganizationName, "abfleet");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::days(CA_VALIDITY_DAYS);
    let cert = params.self_signed(&key).map_err(generate_error)?;
    Ok(IssuedCert {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A leaf certificate for `role` and `name`, signed by the CA. `sans` (DNS names or IP
/// addresses) go into a coordinator's certificate; clients get none.
pub fn issue(
    ca: &IssuedCert,
    role: Role,
    name: &str,
    sans: &[String],
) -> Result<IssuedCert, CertError> {
    check_name(name)?;
    let ca_key = KeyPair::from_pem(&ca.key_pem).map_err(|err| CertError::Parse {
        what: "CA key",
        message: err.to_string(),
    })?;
    let issuer =
        Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key).map_err(|err| CertError::Parse {
            what: "CA certificate",
            message: err.to_string(),
        })?;
    let key = KeyPair::generate().map_err(generate_error)?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn.push(DnType::OrganizationalUnitName, role.as_str());
    dn.push(DnType::OrganizationName, "abfleet");
    params.distinguished_name = dn;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = match role {
        Role::Coordinator => vec![ExtendedKeyUsagePurpose::ServerAuth],
        Role::Agent | Role::Operator | Role::Viewer => vec![ExtendedKeyUsagePurpose::ClientAuth],
    };
    params.use_authority_key_identifier_extension = true;
    let uri = format!("{ROLE_URI_PREFIX}{role}/{name}");
    params.subject_alt_names = vec![SanType::URI(
        uri.try_into()
            .map_err(|err: rcgen::Error| CertError::Generate(err.to_string()))?,
    )];
    for san in sans {
        let entry = match san.parse::<std::net::IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => {
                check_dns_name(san)?;
                SanType::DnsName(
                    san.clone()
                        .try_into()
                        .map_err(|_| CertError::BadSan(san.clone()))?,
                )
            }
        };
        params.subject_alt_names.push(entry);
    }
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::days(LEAF_VALIDITY_DAYS);
    let cert = params.signed_by(&key, &issuer).map_err(generate_error)?;
    Ok(IssuedCert {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// The DER of the first certificate in PEM text.
pub fn der_from_pem(what: &'static str, pem: &str) -> Result<Vec<u8>, CertError> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .map(|der| der.to_vec())
        .map_err(|err| CertError::Parse {
            what,
            message: err.to_string(),
        })
}

/// Verifies `peer_der` against the fleet CA `ca_der` (signature chain, validity now, and
/// the extended key usage its role needs: serverAuth for a coordinator, clientAuth for the
/// others), then returns the role and name its SAN URI carries.
pub fn peer_identity(ca_der: &[u8], peer_der: &[u8]) -> Result<PeerIdentity, CertError> {
    peer_identity_at(ca_der, peer_der, UnixTime::now())
}

/// [`peer_identity`] at a given time (for tests of expiry).
pub fn peer_identity_at(
    ca_der: &[u8],
    peer_der: &[u8],
    now: UnixTime,
) -> Result<PeerIdentity, CertError> {
    let identity = read_role(peer_der)?;
    let ca = CertificateDer::from(ca_der);
    let anchor = webpki::anchor_from_trusted_cert(&ca).map_err(|err| CertError::Parse {
        what: "CA certificate",
        message: err.to_string(),
    })?;
    let peer = CertificateDer::from(peer_der);
    let end_entity = webpki::EndEntityCert::try_from(&peer).map_err(|err| CertError::Parse {
        what: "peer certificate",
        message: err.to_string(),
    })?;
    // `KeyUsage::server_auth()`/`client_auth()` accept a certificate with no extended key
    // usage at all; every certificate `issue` makes carries one, so its absence is refused.
    let usage = webpki::KeyUsage::required(identity.role.required_key_usage().oid);
    end_entity
        .verify_for_usage(
            &[
                webpki::ring::ECDSA_P256_SHA256,
                webpki::ring::ECDSA_P384_SHA384,
                webpki::ring::ED25519,
            ],
            &[anchor],
            &[],
            now,
            usage,
            None,
            None,
        )
        .map_err(|err| match err {
            #[allow(deprecated)]
            webpki::Error::RequiredEkuNotFound | webpki::Error::RequiredEkuNotFoundContext(_) => {
                CertError::MissingKeyUsage {
                    role: identity.role,
                    usage: identity.role.required_key_usage().name,
                }
            }
            other => CertError::Untrusted(other.to_string()),
        })?;
    Ok(identity)
}

/// The role and name a certificate's SAN URI carries, unverified.
fn read_role(der: &[u8]) -> Result<PeerIdentity, CertError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|err| CertError::Parse {
        what: "peer certificate",
        message: err.to_string(),
    })?;
    let sans = cert
        .subject_alternative_name()
        .map_err(|err| CertError::Parse {
            what: "peer certificate's subject alternative names",
            message: err.to_string(),
        })?;
    let uris: Vec<&str> = sans
        .iter()
        .flat_map(|ext| ext.value.general_names.iter())
        .filter_map(|name| match name {
            x509_parser::extensions::GeneralName::URI(uri) => uri.strip_prefix(ROLE_URI_PREFIX),
            _ => None,
        })
        .collect();
    let rest = match uris.as_slice() {
        [] => return Err(CertError::NoRole),
        [one] => *one,
        many => return Err(CertError::ManyRoles(many.len())),
    };
    let (role, name) = rest.split_once('/').ok_or(CertError::NoRole)?;
    let role: Role = role.parse()?;
    check_name(name)?;
    Ok(PeerIdentity {
        role,
        name: name.to_string(),
        certificate: CertificateId {
            serial: normalize_hex(&hex(cert.raw_serial())),
            fingerprint: hex(&sha2::Sha256::digest(der)),
        },
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A certificate name: letters, digits and `._-`, not starting with `.` or `-` (it is part
/// of a URI and of file names).
pub fn check_name(name: &str) -> Result<(), CertError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with(['.', '-'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(CertError::BadName(name.to_string()))
    }
}

fn check_dns_name(name: &str) -> Result<(), CertError> {
    let ok = !name.is_empty()
        && name.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '*')
        });
    if ok {
        Ok(())
    } else {
        Err(CertError::BadSan(name.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn der(cert: &IssuedCert) -> Vec<u8> {
        der_from_pem("certificate", &cert.cert_pem).unwrap()
    }

    #[test]
    fn each_role_reads_back_from_a_certificate_the_ca_signed() {
        let ca = new_ca("test fleet CA").unwrap();
        for role in Role::ALL {
            let sans = if role == Role::Coordinator {
                vec!["localhost".to_string(), "127.0.0.1".to_string()]
            } else {
                vec![]
            };
            let leaf = issue(&ca, role, "bench-7", &sans).unwrap();
            assert!(leaf.key_pem.contains("PRIVATE KEY"));
            let identity = peer_identity(&der(&ca), &der(&leaf)).unwrap();
            assert_eq!((identity.role, identity.name.as_str()), (role, "bench-7"));
            assert_eq!(
                identity.certificate.fingerprint,
                hex(&sha2::Sha256::digest(der(&leaf)))
            );
        }
    }

    #[test]
    fn a_reissued_certificate_has_its_own_serial_and_fingerprint_and_either_names_it() {
        let ca = new_ca("fleet").unwrap();
        let first = peer_identity(
            &der(&ca),
            &der(&issue(&ca, Role::Agent, "bench-7", &[]).unwrap()),
        )
        .unwrap()
        .certificate;
        let again = certificate_facts(&issue(&ca, Role::Agent, "bench-7", &[]).unwrap().cert_pem)
            .unwrap()
            .identity
            .certificate;
        assert_ne!(first.serial, again.serial);
        assert_ne!(first.fingerprint, again.fingerprint);
        assert!(first.serial.len() >= 16, "{}", first.serial);
        // As openssl prints them: upper case, colon-separated, a leading zero byte.
        let colons = |hex: &str| {
            hex.as_bytes()
                .chunks(2)
                .map(|pair| std::str::from_utf8(pair).unwrap().to_uppercase())
                .collect::<Vec<_>>()
                .join(":")
        };
        assert!(first.is_named_by(&colons(&first.fingerprint)));
        assert!(first.is_named_by(&format!("00{}", first.serial.to_uppercase())));
        assert!(first.is_named_by(&format!("0x{}", first.serial)));
        assert!(!first.is_named_by(&again.serial));
        assert!(!first.is_named_by(""));
        assert!(!first.is_named_by("bench-7"));
    }

    /// A fingerprint that starts with 0 (1 certificate in 16) was not found by its own
    /// colon-separated form: the typed text lost its leading zero, the kept one had it.
    #[test]
    fn a_fingerprint_with_a_leading_zero_names_its_certificate() {
        let ca = new_ca("fleet").unwrap();
        let id = (0..400)
            .map(|_| {
                certificate_facts(&issue(&ca, Role::Agent, "bench-0", &[]).unwrap().cert_pem)
                    .unwrap()
                    .identity
                    .certificate
            })
            .find(|id| id.fingerprint.starts_with('0'))
            .expect("one certificate in 16 has a fingerprint starting with 0");
        let colons: Vec<String> = id
            .fingerprint
            .as_bytes()
            .chunks(2)
            .map(|pair| std::str::from_utf8(pair).unwrap().to_uppercase())
            .collect();
        assert!(id.is_named_by(&colons.join(":")), "{}", id.fingerprint);
        assert!(id.is_named_by(&id.fingerprint));
    }

    #[test]
    fn a_certificate_of_another_ca_is_rejected_even_with_a_role() {
        let fleet = new_ca("fleet").unwrap();
        let stranger = new_ca("stranger").unwrap();
        let forged = issue(&stranger, Role::Operator, "mallory", &[]).unwrap();
        let err = peer_identity(&der(&fleet), &der(&forged)).unwrap_err();
        assert!(matches!(err, CertError::Untrusted(_)), "{err}");
        assert!(
            err.to_string().contains("not signed by the fleet CA"),
            "{err}"
        );
        // The CA's own certificate is not a peer certificate.
        assert!(peer_identity(&der(&fleet), &der(&fleet)).is_err());
    }

    #[test]
    fn an_expired_certificate_is_rejected() {
        let ca = new_ca("fleet").unwrap();
        let leaf = issue(&ca, Role::Agent, "bench-1", &[]).unwrap();
        let later = UnixTime::since_unix_epoch(std::time::Duration::from_secs(
            (time::OffsetDateTime::now_utc() + time::Duration::days(LEAF_VALIDITY_DAYS + 1))
                .unix_timestamp() as u64,
        ));
        let err = peer_identity_at(&der(&ca), &der(&leaf), later).unwrap_err();
        assert!(matches!(err, CertError::Untrusted(_)), "{err}");
    }

    #[test]
    fn names_roles_and_sans_are_checked() {
        let ca = new_ca("fleet").unwrap();
        for bad in ["", "../x", "a/b", "-x", "a b", ".hidden"] {
            assert!(
                matches!(
                    issue(&ca, Role::Agent, bad, &[]),
                    Err(CertError::BadName(_))
                ),
                "{bad:?}"
            );
        }
        assert!(matches!(
            "root".parse::<Role>(),
            Err(CertError::UnknownRole(_))
        ));
        assert!(matches!(
            issue(&ca, Role::Coordinator, "coord", &["bad name".into()]),
            Err(CertError::BadSan(_))
        ));
    }

    /// Issue 23: webpki's `client_auth()` accepts a certificate with no extended key usage,
    /// so one the fleet CA signed without it passed as any client role.
    #[test]
    fn a_certificate_the_ca_signed_without_extended_key_usage_is_rejected() {
        let ca = new_ca("fleet").unwrap();
        let issuer =
            Issuer::from_ca_cert_pem(&ca.cert_pem, KeyPair::from_pem(&ca.key_pem).unwrap())
                .unwrap();
        for role in Role::ALL {
            let mut params = CertificateParams::default();
            params.subject_alt_names = vec![SanType::URI(
                format!("{ROLE_URI_PREFIX}{role}/no-eku")
                    .try_into()
                    .unwrap(),
            )];
            assert!(params.extended_key_usages.is_empty());
            let key = KeyPair::generate().unwrap();
            let leaf = params.signed_by(&key, &issuer).unwrap();
            let err = peer_identity(&der(&ca), leaf.der()).unwrap_err();
            assert!(
                matches!(err, CertError::MissingKeyUsage { role: r, .. } if r == role),
                "{role}: {err}"
            );
            assert!(
                err.to_string().contains(role.required_key_usage().name),
                "{err}"
            );
        }
    }

    #[test]
    fn a_certificate_without_a_role_is_rejected() {
        let key = KeyPair::generate().unwrap();
        let plain = CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let ca = new_ca("fleet").unwrap();
        let err = peer_identity(&der(&ca), plain.der()).unwrap_err();
        assert!(matches!(err, CertError::NoRole), "{err}");
    }
}
