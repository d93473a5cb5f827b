//! Named sections of a 64-bit little-endian ELF file (an Intel GPU zebin, an AMDGPU code
//! object), read from the section header table: enough to take `.ze_info` out of a zebin
//! without a tool. Every offset is checked against the file's length: a truncated or foreign
//! file is an error that says so, never a panic.

/// One section's name and bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section<'f> {
    pub name: String,
    /// `sh_type`.
    pub kind: u32,
    pub bytes: &'f [u8],
}

/// The ELF `e_machine` of a file (`EM_INTELGT` = 205, `EM_AMDGPU` = 224, `EM_X86_64` = 62,
/// `EM_AARCH64` = 183), from its first 20 bytes or more: any class, either byte order.
pub fn machine(head: &[u8]) -> Result<u16, String> {
    if head.len() < 20 || head[..4] != *b"\x7fELF" {
        return Err("not an ELF file".into());
    }
    let bytes = [head[0x12], head[0x13]];
    Ok(if head[5] == 2 {
        u16::from_be_bytes(bytes)
    } else {
        u16::from_le_bytes(bytes)
    })
}

/// Every section of `file`, in header order.
pub fn sections(file: &[u8]) -> Result<Vec<Section<'_>>, String> {
    header_checked(file)?;
    let shoff =
        usize::try_from(read_u64(file, 0x28)?).map_err(|_| "section table offset too large")?;
    let shentsize = usize::from(read_u16(file, 0x3A)?);
    let shnum = usize::from(read_u16(file, 0x3C)?);
    let shstrndx = usize::from(read_u16(file, 0x3E)?);
    if shnum == 0 {
        return Ok(Vec::new());
    }
    if shentsize < 64 {
        return Err(format!(
            "section headers of {shentsize} bytes; an ELF64 one is 64"
        ));
    }
    let header = |index: usize| -> Result<(u32, u32, &[u8]), String> {
        let at = shoff + index * shentsize;
        let name = read_u32(file, at)?;
        let kind = read_u32(file, at + 4)?;
        let offset = usize::try_from(read_u64(file, at + 24)?).map_err(|_| "offset too large")?;
        let size = usize::try_from(read_u64(file, at + 32)?).map_err(|_| "size too large")?;
        // SHT_NOBITS (8) occupies no bytes of the file.
        let bytes = if kind == 8 {
            &file[0..0]
        } else {
            file.get(offset..offset.checked_add(size).ok_or("section size overflows")?)
                .ok_or_else(|| format!("section {index} lies beyond the end of the file"))?
        };
        Ok((name, kind, bytes))
    };
    let (_, _, names) = header(shstrndx)?;
    (0..shnum)
        .map(|index| {
            let (name_offset, kind, bytes) = header(index)?;
            let name = names
                .get(name_offset as usize..)
                .and_then(|rest| rest.split(|&b| b == 0).next())
                .map(|raw| String::from_utf8_lossy(raw).into_owned())
                .ok_or_else(|| format!("section {index}'s name lies outside the name table"))?;
            Ok(Section { name, kind, bytes })
        })
        .collect()
}

/// The bytes of the section called `name`, when the file has one.
pub fn section<'f>(file: &'f [u8], name: &str) -> Result<Option<&'f [u8]>, String> {
    Ok(sections(file)?
        .into_iter()
        .find(|s| s.name == name)
        .map(|s| s.bytes))
}

fn header_checked(file: &[u8]) -> Result<(), String> {
    if file.len() < 64 || &file[..4] != b"\x7fELF" {
        return Err("not an ELF file".into());
    }
    if file[4] != 2 || file[5] != 1 {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    Ok(())
}

fn bytes_at<const N: usize>(file: &[u8], at: usize) -> Result<[u8; N], String> {
    file.get(at..at + N)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| format!("the ELF file ends before byte {}", at + N))
}

fn read_u16(file: &[u8], at: usize) -> Result<u16, String> {
    bytes_at(file, at).map(u16::from_le_bytes)
}

fn read_u32(file: &[u8], at: usize) -> Result<u32, String> {
    bytes_at(file, at).map(u32::from_le_bytes)
}

fn read_u64(file: &[u8], at: usize) -> Result<u64, String> {
    bytes_at(file, at).map(u64::from_le_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 with a null section, `.ze_info` and the name table.
    fn tiny_elf(info: &[u8]) -> Vec<u8> {
        let names = b"\0.ze_info\0.shstrtab\0";
        let mut file = vec![0u8; 64];
        file[..4].copy_from_slice(b"\x7fELF");
        file[4] = 2;
        file[5] = 1;
        file[0x12..0x14].copy_from_slice(&205u16.to_le_bytes());
        let info_at = file.len();
        file.extend_from_slice(info);
        let names_at = file.len();
        file.extend_from_slice(names);
        let shoff = file.len();
        file[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        file[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        file[0x3C..0x3E].copy_from_slice(&3u16.to_le_bytes());
        file[0x3E..0x40].copy_from_slice(&2u16.to_le_bytes());
        let mut section = |name: u32, kind: u32, offset: usize, size: usize| {
            let mut h = [0u8; 64];
            h[0..4].copy_from_slice(&name.to_le_bytes());
            h[4..8].copy_from_slice(&kind.to_le_bytes());
            h[24..32].copy_from_slice(&(offset as u64).to_le_bytes());
            h[32..40].copy_from_slice(&(size as u64).to_le_bytes());
            file.extend_from_slice(&h);
        };
        section(0, 0, 0, 0);
        section(1, 0xff000011, info_at, info.len());
        section(10, 3, names_at, names.len());
        file
    }

    #[test]
    fn a_named_section_is_found() {
        let file = tiny_elf(b"version: '1.8'\n");
        assert_eq!(machine(&file).unwrap(), 205);
        assert_eq!(
            machine(&file[..20]).unwrap(),
            205,
            "the header's start is enough"
        );
        assert!(machine(&file[..19]).is_err());
        assert_eq!(
            section(&file, ".ze_info").unwrap(),
            Some(&b"version: '1.8'\n"[..])
        );
        assert_eq!(section(&file, ".text").unwrap(), None);
        let names: Vec<String> = sections(&file)
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["", ".ze_info", ".shstrtab"]);
    }

    #[test]
    fn truncated_or_foreign_files_are_errors() {
        let file = tiny_elf(b"x");
        for cut in [0, 10, 63, file.len() - 30] {
            assert!(sections(&file[..cut]).is_err(), "cut at {cut}");
        }
        assert_eq!(sections(b"#!/bin/sh\n").unwrap_err(), "not an ELF file");
        let mut big_endian = file.clone();
        big_endian[5] = 2;
        assert!(sections(&big_endian).unwrap_err().contains("little-endian"));
    }
}
